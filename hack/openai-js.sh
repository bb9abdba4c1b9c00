#!/usr/bin/env bash
# Makes sure the official OpenAI JavaScript client (npm package openai, pinned)
# is on the machine and prints the directory whose node_modules holds it.
# test/openaiclients runs test/openai-js/client.mjs with it against the
# standalone gateway (IGW_OPENAI_JS_DIR, or this default).
#
# Cached outside the clone (IGW_CACHE_DIR, default ~/.cache/igw), like the
# control plane, so every clone and CI run on the machine reuses it.
set -euo pipefail

VERSION=7.59.0
cache="${IGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/igw}"
dir="$cache/openai-js-$VERSION"
say() { echo "openai-js: $*" >&2; }

if [ ! -s "$dir/node_modules/openai/package.json" ]; then
	command -v npm >/dev/null && command -v node >/dev/null || { say "needs node and npm"; exit 1; }
	say "installing openai@$VERSION from the npm registry (once per machine)"
	work=$(mktemp -d "$cache/openai-js.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache/openai-js.XXXXXX"; })
	trap 'rm -rf "$work"' EXIT
	(cd "$work" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund --save-exact "openai@$VERSION" >&2)
	rm -rf "$dir"
	mv "$work" "$dir"
	trap - EXIT
fi
echo "$dir"
