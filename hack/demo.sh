#!/usr/bin/env bash
# make demo: a simulated GPU fleet behind the standalone gateway, round-robin vs igw.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d cmd/igw-gateway ]; then
	echo "make demo: the demo is not built yet (it arrives with the standalone gateway, issue 7)." >&2
	echo "Until then, 'make test' exercises every component that exists." >&2
	exit 1
fi
exec go run ./cmd/igw-bench demo
