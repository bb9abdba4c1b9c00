#!/usr/bin/env bash
# make demo: a heterogeneous simulated GPU fleet behind the standalone gateway,
# round-robin then igw, side by side (igw-bench demo; about a minute once built).
# Arguments pass through, e.g. hack/demo.sh --out /tmp/igw-demo --duration 20s
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/igw-bench demo "$@"
