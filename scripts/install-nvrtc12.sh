#!/usr/bin/env bash
# install-nvrtc12.sh: put NVRTC 12.4 (Debian 13's non-free libnvrtc12) in a folder of its own, so that CI can
# compile the kernels only a 12.x NVRTC compiles: the sm_90a modules that use Hopper's warpgroup MMA
# (kernels/wgmma.cuh). Debian 12's nvidia-cuda-dev (scripts/install-cuda-dev.sh) brings NVRTC 11.8, which
# cannot target sm_90a; tune's loader prefers libnvrtc.so.12 over .so.11.2 when LD_LIBRARY_PATH names the folder:
#
#   scripts/install-nvrtc12.sh            # -> /opt/tune-nvrtc12 (NVRTC12_DIR to choose another)
#   LD_LIBRARY_PATH=/opt/tune-nvrtc12 go test -tags cuda -run TestNVRTCCompileAll ./cuda
#
# It downloads two packages from the Debian archive (about 18 MB), checks their SHA-256 against the values below
# (from trixie's Packages index) and unpacks them with dpkg-deb; nothing is installed system-wide. Idempotent.
set -euo pipefail
dir=${NVRTC12_DIR:-/opt/tune-nvrtc12}
if [ -e "$dir/libnvrtc.so.12" ] && [ -e "$dir/libnvrtc-builtins.so.12.4" ]; then
  echo "install-nvrtc12: $dir holds NVRTC 12.4, nothing to do"
  exit 0
fi
pool=http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit
debs=(
  "libnvrtc12_12.4.127~12.4.1-2_amd64.deb db76acbd9ad53eae57291114b615ed21551592dee0b1160990a33066d86c251c"
  "libnvrtc-builtins12.4_12.4.127~12.4.1-2_amd64.deb c4f9ea43c3e176a9f46b50718d546adb0dc7344432cd7d8b1483692e0416d24c"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"
for d in "${debs[@]}"; do
  name=${d% *} sum=${d#* }
  curl -fsS --retry 3 -m 300 -o "$tmp/$name" "$pool/$name"
  echo "$sum  $tmp/$name" | sha256sum -c --quiet - || { echo "install-nvrtc12: $name does not have the expected SHA-256" >&2; exit 1; }
  dpkg-deb -x "$tmp/$name" "$tmp/root"
done
cp -a "$tmp"/root/usr/lib/x86_64-linux-gnu/libnvrtc* "$dir/"
echo "install-nvrtc12: NVRTC 12.4 in $dir"
