#!/usr/bin/env bash
# gpu-check.sh: everything the CUDA backend has to show on the GPU machine, in one call of the device tool.
#
# Build on the development machine first (the GPU machine has no Go toolchain), then carry bin/:
#
#   make cuda            # bin/tune-cuda and every package's test binary with -tags cuda, or at least:
#   CGO_ENABLED=1 go test -c -tags cuda -o bin/cuda.test ./cuda
#   CGO_ENABLED=1 go test -c -tags cuda -o bin/tensor-tensortest.test ./tensor/tensortest
#
#   device run (carry: bin):   bash scripts/gpu-check.sh
#
# Steps, each with its own time limit (seconds, overridable), each logged under $OUT:
#   env.log        nvidia-smi, the libraries the backend loads (TestProbe), the kernel cache used
#   tests.log      every bin/*.test with -test.v: the CUDA tests, the shared op suite on the GPU against the CPU
#                  reference, and the model goldens of packages built with -tags cuda   (TESTS_S=300)
#   sanitizer.log  compute-sanitizer memcheck on the op suite, filtered by SANITIZE_RUN  (SANITIZE_S=150)
#   e2e.log        E2E_CMD, an end-to-end `bin/tune-cuda finetune ...` run, if set       (E2E_S=240)
#   bench.log      BenchmarkGemm (BENCHTIME=30x), then PyTorch on the same GEMM shapes   (BENCH_S=120)
#   summary.txt    one line per step, also printed last
# Set SKIP="sanitizer e2e ..." to leave steps out. The exit status is non-zero if any step failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TUNE_KERNEL_CACHE=${TUNE_KERNEL_CACHE:-/tmp/tune-kernels}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
FAILED=0

skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
note() { printf '%-10s %s\n' "$1" "$2" | tee -a "$SUMMARY"; }
# run NAME LIMIT LOG CMD...: runs CMD with a time limit, appending to LOG; records rc and seconds.
run() {
	local name=$1 limit=$2 log=$3
	shift 3
	local t0=$SECONDS
	echo "=== $name: $*" >>"$log"
	timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
	local rc=$?
	local dt=$((SECONDS - t0))
	if [[ $rc -eq 0 ]]; then
		note "$name" "ok (${dt}s)"
	else
		[[ $rc -eq 124 || $rc -eq 137 ]] && note "$name" "TIMEOUT after ${limit}s" || note "$name" "FAILED rc=$rc (${dt}s)"
		FAILED=1
	fi
	return $rc
}

# 1. Environment.
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
	echo "glibc: $(ldd --version | head -1)"
	echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH TUNE_KERNEL_CACHE=$TUNE_KERNEL_CACHE"
	ls -la bin/
} >"$OUT/env.log" 2>&1
if [[ -x bin/cuda.test ]]; then
	run probe 60 "$OUT/env.log" bin/cuda.test -test.run 'TestProbe' -test.v
else
	note probe "skipped: bin/cuda.test is missing (build it with make cuda)"
fi

# 2. Every test binary. The CUDA package's benchmarks run in step 5, not here.
if ! skip tests; then
	shopt -s nullglob
	tests=(bin/*.test)
	if [[ ${#tests[@]} -eq 0 ]]; then
		note tests "skipped: no bin/*.test (build them with make cuda)"
	fi
	deadline=$((SECONDS + ${TESTS_S:-300}))
	for t in "${tests[@]}"; do
		left=$((deadline - SECONDS))
		if ((left < 10)); then
			note "$(basename "$t" .test)" "skipped: TESTS_S=${TESTS_S:-300} used up"
			FAILED=1
			continue
		fi
		# Test binaries run in their package directory, where testdata/ is.
		pkg=$(basename "$t" .test | tr - /)
		dir=.
		[[ -d $pkg ]] && dir=$pkg
		(cd "$dir" && run "$(basename "$t" .test)" "$left" "$OUT/tests.log" "$OLDPWD/$t" -test.v -test.timeout "${left}s")
		[[ $? -ne 0 ]] && FAILED=1
	done
	grep -E '^(--- FAIL|FAIL|panic:)' "$OUT/tests.log" | head -40 >>"$SUMMARY"
	printf 'tests      %s passed, %s failed, %s skipped (subtests included)\n' \
		"$(grep -c -- '--- PASS' "$OUT/tests.log")" "$(grep -c -- '--- FAIL' "$OUT/tests.log")" \
		"$(grep -c -- '--- SKIP' "$OUT/tests.log")" | tee -a "$SUMMARY"
fi

# 3. compute-sanitizer memcheck on the op suite (slow: every kernel is instrumented).
if ! skip sanitizer; then
	suite=""
	for f in bin/tensor-tensortest.test bin/tensortest.test; do [[ -x $f ]] && suite=$f && break; done
	if [[ -z $suite ]]; then
		note sanitizer "skipped: no bin/tensor-tensortest.test"
	elif ! command -v compute-sanitizer >/dev/null; then
		note sanitizer "skipped: compute-sanitizer is not on PATH"
	else
		(cd tensor/tensortest && run sanitizer "${SANITIZE_S:-150}" "$OUT/sanitizer.log" \
			compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
			"$OLDPWD/$suite" -test.run "${SANITIZE_RUN:-TestOpSuite/cuda/(memory|F32|BF16|errors)}" -test.v)
		grep -E 'ERROR SUMMARY|========= (Invalid|Program hit)' "$OUT/sanitizer.log" | head -5 | tee -a "$SUMMARY"
	fi
fi

# 4. End to end.
if ! skip e2e; then
	if [[ -z ${E2E_CMD:-} ]]; then
		note e2e "skipped: set E2E_CMD, e.g. E2E_CMD='bin/tune-cuda finetune --bf16 recipes/bert.yaml'"
	else
		run e2e "${E2E_S:-240}" "$OUT/e2e.log" bash -c "$E2E_CMD"
		tail -15 "$OUT/e2e.log" | sed 's/^/    /' >>"$SUMMARY"
	fi
fi

# 5. Benchmarks: ours, then PyTorch on the same shapes on the same GPU.
if ! skip bench && [[ -x bin/cuda.test ]]; then
	run bench "${BENCH_S:-120}" "$OUT/bench.log" bin/cuda.test -test.run '^$' -test.bench "${BENCH:-Gemm}" \
		-test.benchtime "${BENCHTIME:-30x}"
	grep -E 'TFLOP/s' "$OUT/bench.log" | sed -E 's/^Benchmark/  /; s/-[0-9]+ +[0-9]+ +[0-9.]+ ns\/op//' | tee -a "$SUMMARY"
	if command -v python3 >/dev/null && ! skip torch; then
		run torch 120 "$OUT/bench.log" python3 - <<'PY'
import torch
torch.backends.cuda.matmul.allow_tf32 = False
shapes = [  # name, dtype, m, n, k, batch, transA, transB (as BenchmarkGemm)
    ("bf16 4096x4096x4096", torch.bfloat16, 4096, 4096, 4096, 1, False, False),
    ("fp16 4096x4096x4096", torch.float16, 4096, 4096, 4096, 1, False, False),
    ("fp32 4096x4096x4096", torch.float32, 4096, 4096, 4096, 1, False, False),
    ("bert 32x128 qkv 4096x2304x768", torch.bfloat16, 4096, 2304, 768, 1, False, True),
    ("bert 32x128 ffn-up 4096x3072x768", torch.bfloat16, 4096, 3072, 768, 1, False, True),
    ("bert 32x128 ffn-down 4096x768x3072", torch.bfloat16, 4096, 768, 3072, 1, False, True),
    ("bert 32x128 dW ffn-up 3072x768x4096", torch.bfloat16, 3072, 768, 4096, 1, True, False),
    ("bert 32x128 scores 384x(128x128x64)", torch.bfloat16, 128, 128, 64, 384, False, True),
    ("bert 64x512 ffn-up 32768x3072x768", torch.bfloat16, 32768, 3072, 768, 1, False, True),
]
for name, dt, m, n, k, batch, ta, tb in shapes:
    a = torch.randn(batch, *((k, m) if ta else (m, k)), device="cuda", dtype=dt)
    b = torch.randn(batch, *((n, k) if tb else (k, n)), device="cuda", dtype=dt)
    f = lambda: torch.bmm(a.transpose(1, 2) if ta else a, b.transpose(1, 2) if tb else b)
    for _ in range(3):
        f()
    times = []
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    med = sorted(times)[len(times) // 2]
    print(f"torch {name}: {med*1e3:.1f} µs/gemm {2*m*n*k*batch/(med*1e-3)/1e12:.1f} TFLOP/s", flush=True)
PY
		grep -E '^torch ' "$OUT/bench.log" | sed 's/^/  /' | tee -a "$SUMMARY"
	fi
fi

echo
echo "==== gpu-check summary (logs in $OUT) ===="
cat "$SUMMARY"
exit $FAILED
