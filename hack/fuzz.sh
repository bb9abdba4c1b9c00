#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each (default 10s).
# New findings land in the package's testdata/fuzz and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
status=0
while IFS= read -r pkg; do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz: $pkg $target for $fuzztime"
		if ! go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" >"/tmp/igw-fuzz-$target.log" 2>&1; then
			cat "/tmp/igw-fuzz-$target.log"
			status=1
		fi
	done
done < <(go list ./... )
exit $status
