#!/usr/bin/env bash
# Max RSS of `tune finetune recipes/tiny.yaml` on hostile training files against the same run on the tiny data
# (issue 18: memory bounded by the recipe, never by values in a file). Cases:
#   baseline    the tiny training file
#   row-50MB    line 3 replaced by a 50 MB row (refused: a row may hold 1 MiB)
#   row-900KB   line 3 replaced by a 900 KB row (accepted: tokenized in pieces, truncated to max_length)
#   label-huge  line 3 labelled 2147483647 (refused before any table is sized)
#   label-1e8   line 3 labelled 100000000
# Every run is capped at training.max_steps=STEPS (default 20) so that the cases compare like with like.
# Needs /usr/bin/time (GNU time). Usage: scripts/hostile-rss.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/tune" ./cmd/tune
train=recipes/data/tiny/train.tsv

variant() { # name row: the training file with line 3 replaced by row
	local out="$work/$1.tsv"
	{ sed -n 1,2p "$train"; printf '%s\n' "$2"; sed -n '4,$p' "$train"; } > "$out"
	echo "$out"
}
bigrow() { # bytes: a row of that many bytes of words, labelled 1
	head -c "$1" < <(yes 'a really very good film' | tr '\n' ' ')
	printf '\t1'
}

printf '%-11s %12s %5s  %s\n' case max_rss_kB exit "last line of stderr"
run() { # name file
	local log="$work/$1.log"
	set +e
	/usr/bin/time -v "$work/tune" finetune recipes/tiny.yaml "data.train=$2" "training.output_dir=$work/out-$1" \
		"training.max_steps=$steps" > "$work/$1.out" 2> "$log"
	local code=$?
	set -e
	local rss; rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
	local last; last=$(grep -v -e '^\s' -e '^Command exited' "$log" | tail -1 | cut -c1-150 || true)
	printf '%-11s %12s %5s  %s\n' "$1" "$rss" "$code" "$last"
}
run baseline "$train"
run row-50MB "$(variant row-50MB "$(bigrow 50000000)")"
run row-900KB "$(variant row-900KB "$(bigrow 900000)")"
run label-huge "$(variant label-huge "A fine film.	2147483647")"
run label-1e8 "$(variant label-1e8 "A fine film.	100000000")"
