#!/usr/bin/env bash
# gpu-e2e.sh: issue 8's end-to-end runs on the GPU machine, in one call of the device tool.
#
# A randomly initialised bert-base-sized BertForSequenceClassification is written in Hugging Face format by
# tools/reference/make_bert_base_checkpoint.py (no pretrained weights travel there; the real bert-base-uncased
# tokenizer does), then `tune finetune` trains it on SST-2 for one epoch with recipes/bert.yaml (LoRA r=8 on
# query/value) and recipes/bert-full.yaml (full fine-tuning), each with --bf16 and with --fp16.
#
#   SHARED=.shared/data OUT=... TUNE=bin/tune-cuda bash scripts/gpu-e2e.sh [RUN ...]
#
# RUN is any of lora-bf16 full-bf16 lora-fp16 full-fp16 (default: all). Each run's log, metrics.jsonl,
# trainer_state.json and training_curve.png are packed into $OUT/e2e.tgz; the summary is printed last.
set -u
S=${SHARED:-../shared/data}
OUT=${OUT:-out/gpu-e2e}
W=${WORK:-/tmp/tune-e2e}
TUNE=${TUNE:-bin/tune-cuda}
RUN_S=${RUN_S:-170}
mkdir -p "$OUT" "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
runs=("$@"); [ ${#runs[@]} -gt 0 ] || runs=(lora-bf16 full-bf16 lora-fp16 full-fp16)
summary=$OUT/e2e-summary.txt; : >"$summary"

ck=$W/bert-base-random
[ -f "$ck/model.safetensors" ] || python3 tools/reference/make_bert_base_checkpoint.py "$ck" --tokenizer-dir "$S/bert-base-uncased" | tee -a "$summary"

for r in "${runs[@]}"; do
  kind=${r%-*} prec=${r#*-}
  recipe=recipes/bert.yaml; [ "$kind" = full ] && recipe=recipes/bert-full.yaml
  dir=$W/$r
  t0=$SECONDS
  timeout --kill-after=10 "$RUN_S" "$TUNE" finetune "--$prec" "$recipe" model.path="$ck" \
    data.train="$S/sst2/train.tsv" data.eval="$S/sst2/dev.tsv" data.max_length=64 \
    training.output_dir="$dir" training.save_strategy=no training.logging_steps=50 \
    training.overwrite_output_dir=true >"$W/$r.log" 2>&1
  rc=$?
  cp "$W/$r.log" "$dir/" 2>/dev/null
  {
    printf '%-10s rc=%d  %ds  ' "$r" "$rc" $((SECONDS - t0))
    grep -E '^eval:' "$W/$r.log" | tail -1
    grep -E '^trained ' "$W/$r.log" | tail -1 | sed 's/^/           /'
    grep -E 'trainable params' "$W/$r.log" | head -1 | sed 's/^/           /'
  } | tee -a "$summary"
  [ $rc -eq 0 ] || tail -20 "$W/$r.log"
done
(cd "$W" && tar czf "$OUT/e2e.tgz" --exclude='*.safetensors' --exclude='checkpoint-*' $(printf '%s ' "${runs[@]}") 2>/dev/null)
echo "== e2e summary"; cat "$summary"
