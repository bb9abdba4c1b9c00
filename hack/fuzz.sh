#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each (default 10s).
# New findings land in the package's testdata/fuzz and fail the run.
#
# Go 1.26's fuzz coordinator can report "context deadline exceeded" at the
# -fuzztime boundary on a loaded machine without having found anything
# (go.dev/issue/75804, fixed in Go 1.27). A finding always writes a reproducer,
# so a failure counts only when one was written or the log shows something
# other than that bare deadline; such a deadline-only run is retried once, then
# reported as a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
status=0

# only_deadline LOG: the run failed with nothing but the coordinator's deadline.
only_deadline() {
	grep -q 'context deadline exceeded' "$1" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$1"
}

while IFS= read -r pkg; do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		log="/tmp/igw-fuzz-$target.log"
		for attempt in 1 2; do
			echo "fuzz: $pkg $target for $fuzztime"
			if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
				break
			fi
			if ! only_deadline "$log"; then
				cat "$log"
				status=1
				break
			fi
			if [ "$attempt" = 2 ]; then
				echo "fuzz: warning: $target stopped twice on the fuzz coordinator's deadline with no finding (go.dev/issue/75804)" >&2
			fi
		done
	done
done < <(go list ./...)
exit $status
