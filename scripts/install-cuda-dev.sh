#!/usr/bin/env bash
# install-cuda-dev.sh: install what building tune with `-tags cuda` needs on Debian 12 (bookworm), without a GPU.
#
# Debian's non-free nvidia-cuda-dev (CUDA 11.8) brings /usr/include/{cuda.h,cublasLt.h,nvrtc.h}, a libcuda.so to
# link against (gorgonia.org/cu links libcuda) and libnvrtc.so.11.2, which compiles tune's kernels without a GPU,
# so CI can compile-check every .cu file. cuBLASLt and NVRTC are opened at run time, so a binary built against
# these 11.8 headers runs on newer drivers and CUDA 12/13 libraries (see docs/CUDA.md). gcc is needed by cgo.
#
# Idempotent: it does nothing when /usr/include/cuda.h exists and gcc is installed. Needs root (apt-get) and
# network access to the Debian archive; about 775 MB to download the first time.
set -euo pipefail

if [ -e /usr/include/cuda.h ] && command -v gcc >/dev/null 2>&1; then
  echo "install-cuda-dev: /usr/include/cuda.h and gcc present, nothing to do"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-cuda-dev: must run as root (it uses apt-get)" >&2
  exit 1
fi
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != "bookworm" ]; then
  echo "install-cuda-dev: written for Debian 12 (bookworm), this is ${PRETTY_NAME:-unknown}; install the CUDA headers, libcuda.so and libnvrtc yourself" >&2
  exit 1
fi

src=/etc/apt/sources.list.d/nonfree.sources
# "non-free" as a whole word: Debian 12's default sources list non-free-firmware, which does not hold CUDA.
if ! grep -rqsE '(^|[[:space:]])non-free([[:space:]]|$)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "install-cuda-dev: enabling Debian's contrib and non-free components in $src"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends gcc libc6-dev nvidia-cuda-dev

for f in /usr/include/cuda.h /usr/include/cublasLt.h /usr/include/nvrtc.h; do
  [ -e "$f" ] || { echo "install-cuda-dev: $f is still missing after the install" >&2; exit 1; }
done
echo "install-cuda-dev: installed nvidia-cuda-dev $(dpkg-query -W -f='${Version}' nvidia-cuda-dev)"
