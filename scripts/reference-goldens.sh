#!/usr/bin/env bash
# Regenerates every reference golden from the real libraries (torch, transformers, peft, tokenizers) on the GPU
# machine, in one call. Usage there, from the repository root:
#   SHARED=.shared/data OUT=/some/dir bash scripts/reference-goldens.sh [step ...]
# SHARED is a copy of ../shared/data (the device tool carries only the repository), OUT receives the logs and a
# tarball of the regenerated testdata folders to unpack here (tar xzf goldens.tgz). Steps default to all:
# tokenizer amp bert lora trainer safetensors.
set -uo pipefail
S=${SHARED:-../shared/data}
OUT=${OUT:-/tmp/tune-goldens}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(tokenizer amp bert lora trainer safetensors)
dirs=(); status=0
run() { # name dir cmd...
  local name=$1 dir=$2; shift 2
  echo "=== $name: $*"
  if "$@" >"$OUT/$name.log" 2>&1; then echo "    ok"; dirs+=("$dir"); else echo "    FAILED (tail of $name.log):"; tail -n 25 "$OUT/$name.log"; status=1; fi
}
python3 -c 'import torch, transformers, tokenizers, peft, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__)'
for s in "${steps[@]}"; do
  case $s in
    tokenizer) run tokenizer testdata/tokenizer python3 tools/reference/tokenizer_goldens.py --tokenizer "$S/bert-base-uncased/tokenizer.json" --sst2 "$S/sst2/dev.tsv" --out testdata/tokenizer ;;
    amp) run amp testdata/amp python3 tools/reference/gradscaler_golden.py testdata/amp ;;
    bert) run bert testdata/bert python3 tools/reference/bert_goldens.py testdata/bert --tiny-bert-random "$S/tiny-bert-random" ;;
    lora) [ -f tools/reference/peft_goldens.py ] && run lora testdata/lora python3 tools/reference/peft_goldens.py testdata/lora --tiny-bert-random "$S/tiny-bert-random" ;;
    trainer) [ -f tools/reference/trainer_compare.py ] && run trainer testdata/trainer python3 tools/reference/trainer_compare.py testdata/trainer --model "$S/tiny-bert-random" --data "$S/sst2/train.tsv" ;;
    safetensors) run safetensors testdata/safetensors/reference python3 tools/reference/make_safetensors_fixtures.py testdata/safetensors/reference ;;
    *) echo "unknown step $s"; status=1 ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] && tar czf "$OUT/goldens.tgz" "${dirs[@]}" && ls -la "$OUT"
exit $status
