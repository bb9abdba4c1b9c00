#!/usr/bin/env bash
# Makes sure Envoy Gateway's egctl exists, building it from the pinned module in
# hack/tools/egctl when missing, and prints its path. The operator's translation
# test runs `egctl x translate` (Envoy Gateway's real translator, offline).
#
# The binary is cached outside the clone (IGW_CACHE_DIR, default ~/.cache/igw)
# because the cold build takes about 15 minutes on 2 cores.
set -euo pipefail

EG_VERSION=1.9.1
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${IGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/igw}"
dir="$cache/egctl-v$EG_VERSION"
bin="$dir/egctl"

mkdir -p "$dir"
# One build at a time: concurrent runs wait for the first instead of compiling
# the same binary side by side.
exec 9>"$dir/.build.lock"
[ -x "$bin" ] || flock 9
if [ ! -x "$bin" ]; then
	echo "egctl: building egctl v$EG_VERSION (about 15 minutes the first time, cached afterwards)" >&2
	start=$(date +%s)
	(cd "$root/hack/tools/egctl" && go build -o "$bin.partial" github.com/envoyproxy/gateway/cmd/egctl)
	mv "$bin.partial" "$bin"
	echo "egctl: built in $(($(date +%s) - start))s" >&2
fi

echo "$bin"
