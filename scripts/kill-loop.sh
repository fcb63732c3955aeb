#!/usr/bin/env bash
# Kill -9 loop (issue 18): a tune finetune run on the tiny recipe, saving every few steps with rotation, is
# killed with SIGKILL at random moments KILLS times (default 30), each time resumed with
# resume_from_checkpoint=true (from scratch while no checkpoint is complete). After every kill it checks the
# checkpoints: a checkpoint-N with a manifest must have every listed file at its size and SHA-256 (else it is an
# incomplete checkpoint that would be listed as complete), and the newest complete step must not go back (else
# a complete checkpoint was lost). Then the run is finished without kills and its final model, optimizer and
# last checkpoints are compared byte for byte with an uninterrupted run of the same recipe (resume bit-exact).
# Usage: scripts/kill-loop.sh [KILLS] [MAX_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-30}
steps=${2:-6000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/tune" ./cmd/tune
args=(recipes/tiny.yaml "training.max_steps=$steps" training.per_device_train_batch_size=8
	training.save_strategy=steps training.save_steps=4 training.save_total_limit=2 training.eval_strategy=no
	training.logging_steps=10 training.warmup_steps=0)

# verify DIR: prints "complete-steps bad incomplete" for the checkpoints of DIR.
verify() {
	python3 - "$1" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
good, bad, incomplete = [], 0, 0
for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
    d = os.path.join(out, name)
    if not (name.startswith("checkpoint-") and name[11:].isdigit() and os.path.isdir(d)):
        continue
    m = os.path.join(d, "checkpoint_manifest.json")
    if not os.path.exists(m):
        incomplete += 1
        continue
    ok = True
    try:
        files = json.load(open(m))["files"]
    except Exception:
        files, ok = [], False
    for f in files:
        p = os.path.join(d, f["name"])
        if not os.path.exists(p) or os.path.getsize(p) != f["size"] or \
                hashlib.sha256(open(p, "rb").read()).hexdigest() != f["sha256"]:
            ok = False
    if ok:
        good.append(int(name[11:]))
    else:
        bad += 1
print(max(good) if good else -1, bad, incomplete)
PY
}

echo "reference: an uninterrupted run of $steps steps"
"$work/tune" finetune "${args[@]}" "training.output_dir=$work/ref" > "$work/ref.log" 2>&1

out="$work/killed"
newest=-1 total_bad=0 lost=0 incomplete_seen=0 stale=0 mid=0 reported=0
for ((i = 1; i <= kills; i++)); do
	extra=()
	if compgen -G "$out/checkpoint-*/checkpoint_manifest.json" > /dev/null; then
		extra=(training.resume_from_checkpoint=true)
	else
		rm -rf "$out" # nothing complete to keep: start afresh
	fi
	"$work/tune" finetune "${args[@]}" "training.output_dir=$out" "${extra[@]}" > "$work/run.log" 2>&1 &
	pid=$!
	sleep "$(python3 -c 'import random; print(round(random.uniform(0.4, 2.5), 3))')"
	if ! kill -0 "$pid" 2> /dev/null; then
		wait "$pid" || { echo "run $i failed before the kill:"; tail -5 "$work/run.log"; exit 1; }
		echo "run $i finished before its kill; raise MAX_STEPS"; exit 1
	fi
	compgen -G "$out/.tmp-checkpoint-*" > /dev/null && mid=$((mid + 1)) || true
	kill -9 "$pid"
	wait "$pid" 2> /dev/null || true
	grep -q 'stale lock' "$work/run.log" && stale=$((stale + 1)) || true
	grep -q 'incomplete checkpoint, ignored' "$work/run.log" && reported=$((reported + 1)) || true
	read -r now bad incomplete < <(verify "$out")
	total_bad=$((total_bad + bad))
	incomplete_seen=$((incomplete_seen + incomplete))
	if ((now < newest)); then lost=$((lost + 1)); fi
	newest=$((now > newest ? now : newest))
	printf 'kill %2d: newest complete checkpoint %4d, manifest but wrong files %d, incomplete (reported) %d\n' "$i" "$now" "$bad" "$incomplete"
done

echo "finishing the killed run without kills"
"$work/tune" finetune "${args[@]}" "training.output_dir=$out" training.resume_from_checkpoint=true > "$work/final.log" 2>&1 ||
	{ tail -5 "$work/final.log"; exit 1; }
grep -m1 'resuming from' "$work/final.log" || true
same=0 differ=0
for f in model.safetensors config.json; do
	if cmp -s "$work/ref/$f" "$out/$f"; then same=$((same + 1)); else differ=$((differ + 1)); echo "differs: $f"; fi
done
for d in "$work"/ref/checkpoint-*; do
	for f in model.safetensors optimizer.safetensors scheduler.json rng_state.json; do
		if cmp -s "$d/$f" "$out/$(basename "$d")/$f"; then same=$((same + 1)); else differ=$((differ + 1)); echo "differs: $(basename "$d")/$f"; fi
	done
done
echo "kills: $kills (a checkpoint save in progress at $mid of them); resumed runs that reported a stale lock: $stale, an incomplete checkpoint: $reported"
echo "incomplete checkpoints listed as complete: $total_bad; complete checkpoints lost: $lost; incomplete folders after the kills (summed): $incomplete_seen"
echo "files identical to the uninterrupted run: $same, different: $differ"
((total_bad == 0 && lost == 0 && differ == 0))
