#!/usr/bin/env bash
# bench-gpu.sh: tune bench and the PyTorch reference of the same training step, on the same GPU, in one call of
# the device tool; prints the tune/PyTorch table last.
#
# Build here first (the GPU machine has no Go toolchain) and carry the binary:
#
#   CGO_ENABLED=1 go build -buildvcs=true -tags cuda -o bin/tune-cuda ./cmd/tune   # -buildvcs: results name the commit
#   device run (carry: bin/tune-cuda):   OUT=$OUT bash scripts/bench-gpu.sh
#
# Configurations: BERT-base (random init, 2 labels, dropout 0.1), batch × seq in CONFIGS (32x128 64x512),
# FP32 / FP16 / BF16, full fine-tuning and LoRA r=8 on query,value (+ classifier), WARMUP (5) untimed then
# STEPS (30) timed steps each, TF32 off. Steps, each with a time limit (seconds) inside a total DEADLINE (560):
#
#   env.log                    nvidia-smi, library versions
#   tune-BxT-{full,lora}.json  bin/tune-cuda bench per configuration and fine-tuning (all three precisions)  TUNE_S=150
#   pytorch.json               tools/reference/bench_pytorch.py, eager, sdpa attention, all configurations,
#                              plus torch.profiler tables of the two target configurations                  TORCH_S=200
#   breakdown-*.json           tune bench --breakdown of one BF16 step of the two target configurations:
#                              64x512 full and 32x128 LoRA (every op timed alone between CUDA events)        BREAKDOWN_S=90
#   pytorch-compile.json       the same in PyTorch under torch.compile, only BF16 64x512 full and 32x128 LoRA
#                              (COMPILE="64x512:full 32x128:lora"; compiling takes ~1 min each)             COMPILE_S=220
#   tune-dec-*.json,           the causal LMs in DECODERS ("smollm2-135m:full qwen2.5-0.5b:lora"), DECODER_BT
#   pytorch-dec-*.json         (8x2048), BF16: tune bench --model (LoRA r=16 all-linear; --breakdown) and
#                              tools/reference/bench_decoder_pytorch.py on the same step, 10 + 3 steps  DECODER_S=150
#   nsys-*.txt                 if nsys is installed (NSYS=1): the CUDA kernel summary of tune's BF16 step
#   results.tgz                every JSON, the reports and logs in one file (for transfers that limit the file count)
#   report.txt, report.md      tune bench report over everything: the table with tune/PyTorch ratios of time
#                              and memory, the issue's targets, the per-op breakdowns; bench.png the chart
#
# SKIP="compile breakdown ..." leaves steps out. The exit status is non-zero if a step failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=${TUNE_BIN:-bin/tune-cuda}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TUNE_KERNEL_CACHE=${TUNE_KERNEL_CACHE:-/tmp/tune-kernels}
export PYTHONUNBUFFERED=1
CONFIGS=${CONFIGS:-"32x128 64x512"}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
COMPILE=${COMPILE:-"64x512:full 32x128:lora"}
DEADLINE=$((SECONDS + ${DEADLINE:-560}))
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
FAILED=0

skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
note() { printf '%-28s %s\n' "$1" "$2" >>"$SUMMARY"; }
# step NAME LIMIT LOG CMD...: runs CMD with the smaller of LIMIT and the time left, appending to LOG.
step() {
	local name=$1 limit=$2 log=$3
	shift 3
	local left=$((DEADLINE - SECONDS))
	if ((left < 15)); then
		note "$name" "skipped: DEADLINE reached"
		FAILED=1
		return 1
	fi
	((limit > left)) && limit=$left
	local t0=$SECONDS
	echo "=== $name: $*" >>"$log"
	timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
	local rc=$?
	if [[ $rc -eq 0 ]]; then
		note "$name" "ok ($((SECONDS - t0))s)"
	else
		[[ $rc -eq 124 || $rc -eq 137 ]] && note "$name" "TIMEOUT after ${limit}s" || note "$name" "FAILED rc=$rc ($((SECONDS - t0))s), see $(basename "$log")"
		FAILED=1
	fi
	return $rc
}

{
	date -u +%Y-%m-%dT%H:%M:%SZ
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv
	python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "peft", peft.__version__)'
	echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH TUNE_KERNEL_CACHE=$TUNE_KERNEL_CACHE"
	ls -la "$BIN"
	"$BIN" env
} >"$OUT/env.log" 2>&1
if [[ ! -x $BIN ]]; then
	note tune "missing $BIN: build it with CGO_ENABLED=1 go build -buildvcs=true -tags cuda -o bin/tune-cuda ./cmd/tune and carry it"
	FAILED=1
fi

# 1. tune, every configuration. One process per shape and fine-tuning; the kernel cache is shared.
if [[ -x $BIN ]] && ! skip tune; then
	for cfg in $CONFIGS; do
		b=${cfg%x*} t=${cfg#*x}
		for tuning in full lora; do
			flags=()
			[[ $tuning == lora ]] && flags=(--lora --lora-r 8 --lora-targets query,value)
			rm -f "$OUT/tune-$cfg-$tuning.json"
			step "tune $cfg $tuning" "${TUNE_S:-150}" "$OUT/tune.log" "$BIN" bench --device cuda --model bert-base \
				--batch "$b" --seq "$t" --modes fp32,fp16,bf16 "${flags[@]}" --steps "$STEPS" --warmup "$WARMUP" \
				--json "$OUT/tune-$cfg-$tuning.json"
		done
	done
fi

# 2. PyTorch eager (sdpa attention), every configuration, with profiles of the two target configurations.
if ! skip torch; then
	rm -f "$OUT/pytorch.json"
	step "pytorch eager" "${TORCH_S:-200}" "$OUT/pytorch.log" python3 tools/reference/bench_pytorch.py "$OUT" \
		--configs "$(echo $CONFIGS | tr ' ' ,)" --modes fp32,fp16,bf16 --tuning full,lora --impl eager \
		--steps "$STEPS" --warmup "$WARMUP" --profile bf16:64x512,bf16:32x128:lora --name pytorch
fi

# 3. Where tune's BF16 step spends its time (every op timed alone; the step time itself comes from step 1).
if [[ -x $BIN ]] && ! skip breakdown; then
	for target in 64x512:full 32x128:lora; do
		cfg=${target%:*} tuning=${target#*:}
		b=${cfg%x*} t=${cfg#*x}
		flags=()
		[[ $tuning == lora ]] && flags=(--lora --lora-r 8)
		rm -f "$OUT/breakdown-$cfg-$tuning.json"
		step "breakdown $cfg $tuning" "${BREAKDOWN_S:-90}" "$OUT/breakdown.log" "$BIN" bench --device cuda \
			--model bert-base --batch "$b" --seq "$t" --modes bf16 "${flags[@]}" --steps 10 --warmup 3 --breakdown \
			--json "$OUT/breakdown-$cfg-$tuning.json"
	done
fi

# 4. PyTorch under torch.compile, the target configurations only (compilation dominates the time).
if ! skip compile; then
	rm -f "$OUT"/pytorch-compile-*.json
	for target in $COMPILE; do
		cfg=${target%:*} tuning=${target#*:}
		step "pytorch compile $cfg $tuning" "${COMPILE_S:-220}" "$OUT/pytorch-compile.log" python3 \
			tools/reference/bench_pytorch.py "$OUT" --configs "$cfg" --modes bf16 --tuning "$tuning" --impl compile \
			--steps "$STEPS" --warmup "$WARMUP" --name "pytorch-compile-$cfg-$tuning"
	done
fi

# 5. The causal LMs: tune and PyTorch eager on the same step (BF16, AdamW, clip 1.0), one preset at a time.
if ! skip decoders; then
	DECODER_BT=${DECODER_BT:-8x2048}
	b=${DECODER_BT%x*} t=${DECODER_BT#*x}
	for target in ${DECODERS:-smollm2-135m:full qwen2.5-0.5b:lora}; do
		model=${target%:*} tuning=${target#*:}
		flags=() pyflags=()
		[[ $tuning == lora ]] && flags=(--lora --lora-r 16 --lora-targets all-linear) pyflags=(--lora "$model")
		rm -f "$OUT/tune-dec-$model-$tuning.json" "$OUT/pytorch-dec-$model-$tuning.json"
		if [[ -x $BIN ]]; then
			step "tune $model $tuning" "${DECODER_S:-150}" "$OUT/decoders.log" "$BIN" bench --device cuda --model "$model" \
				--batch "$b" --seq "$t" --modes bf16 "${flags[@]}" --steps 10 --warmup 3 --breakdown \
				--json "$OUT/tune-dec-$model-$tuning.json"
		fi
		step "pytorch $model $tuning" "${DECODER_S:-150}" "$OUT/decoders.log" python3 tools/reference/bench_decoder_pytorch.py \
			--presets "$model" --bt "$DECODER_BT" "${pyflags[@]}" --steps 10 --warmup 3 \
			--json "$OUT/pytorch-dec-$model-$tuning.json"
	done
fi

# 6. Optional: nsys kernel summary of tune's BF16 32x128 step (nsys is not always installed).
if [[ -x $BIN ]] && [[ ${NSYS:-0} == 1 ]] && command -v nsys >/dev/null; then
	step "nsys tune bf16" 120 "$OUT/nsys.log" nsys profile --stats=true --force-overwrite true -o "$OUT/nsys-tune" \
		"$BIN" bench --device cuda --model bert-base --modes bf16 --steps 5 --warmup 3
	grep -A 40 'cuda_gpu_kern_sum' "$OUT/nsys.log" >"$OUT/nsys-kernels.txt" 2>/dev/null
fi

# 7. The report: tune/PyTorch ratios, the targets, the chart; then the breakdowns.
shopt -s nullglob
results=("$OUT"/tune-*.json "$OUT"/pytorch.jso[n] "$OUT"/pytorch-compile-*.json "$OUT"/pytorch-dec-*.json)
breakdowns=("$OUT"/breakdown-*.json)
if [[ -x $BIN ]] && ((${#results[@]} > 0)); then
	rm -f "$OUT/bench.png"
	"$BIN" bench report --markdown "${results[@]}" >"$OUT/report.md" 2>&1
	"$BIN" bench report --png "$OUT/bench.png" "${results[@]}" >"$OUT/report.txt" 2>&1 || FAILED=1
	((${#breakdowns[@]} > 0)) && "$BIN" bench report "${breakdowns[@]}" >"$OUT/breakdown.txt" 2>&1
fi

(cd "$OUT" && tar czf results.tgz --exclude results.tgz ./*.json ./*.txt ./*.log ./*.md 2>/dev/null)

echo
echo "==== bench-gpu steps (logs in $OUT) ===="
cat "$SUMMARY"
grep -E 'FAILED|Error|error' "$OUT"/pytorch*.log 2>/dev/null | head -10
if [[ -f $OUT/breakdown.txt ]]; then
	echo
	echo "==== tune BF16 per-op breakdown (first lines; full text in breakdown.txt) ===="
	grep -A 16 '^per-op time' "$OUT/breakdown.txt" | cut -c1-140
fi
if [[ -f $OUT/report.txt ]]; then
	echo
	echo "==== tune vs PyTorch (time and memory ratios tune/x: below 1 is better for tune) ===="
	cat "$OUT/report.txt"
fi
exit $FAILED
