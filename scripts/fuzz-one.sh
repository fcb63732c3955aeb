#!/usr/bin/env bash
# fuzz-one.sh PKG TARGET FUZZTIME MINIMIZETIME PARALLEL: fuzz one target (make fuzz calls it once per target).
#
# go test's fuzzing coordinator can end a run with "--- FAIL: FuzzX ... context deadline exceeded" when -fuzztime
# runs out while a worker is still busy with a slow input (seen on a loaded 2-core machine). That is not a
# finding: a finding prints "Failing input written to testdata/fuzz/..." and keeps the input. Such a run is
# reported and counted as passed; every other failure fails.
set -uo pipefail
pkg=$1 name=$2 time=$3 minimize=$4 parallel=$5
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "${GO:-go} test -run '^\$' -fuzz '^$name\$' -fuzztime $time -fuzzminimizetime $minimize -parallel $parallel $pkg"
"${GO:-go}" test -run '^$' -fuzz "^$name\$" -fuzztime "$time" -fuzzminimizetime "$minimize" -parallel "$parallel" "$pkg" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [[ $rc -ne 0 ]] && grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written to|panic:|^    [a-z_]+\.go:[0-9]+:' "$log"; then
	echo "fuzz-one: $name stopped by the fuzz deadline while a worker was busy (no failing input); counted as passed"
	exit 0
fi
exit "$rc"
