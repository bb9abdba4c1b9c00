#!/usr/bin/env bash
# Fails when a product package (the operator, EPP, BBR, standalone gateway,
# rendering, and the commands shipped from them) depends on the benchmark
# (pkg/bench), the simulator (pkg/sim) or the simulator's stand-in tokenizer
# (pkg/tokenizer), directly or through other packages, and prints the import
# chain of every such dependency. Tests of product packages may use them; the
# rule is about what the products are built from. make verify runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

products=(./pkg/epp/... ./pkg/bbr/... ./pkg/gateway/... ./pkg/frontdoor/... ./pkg/global/... ./pkg/globalsummary/... ./pkg/render/... ./controllers/...
	./cmd/manager ./cmd/epp ./cmd/bbr ./cmd/igw-gateway ./cmd/igw-global)
module=$(go list -m)
forbidden="^$module/pkg/(bench|sim|tokenizer)(/|$)"

# The import graph of the products and everything they depend on.
declare -A imports
while read -r pkg deps; do
	imports[$pkg]=$deps
done < <(go list -deps -f '{{.ImportPath}} {{join .Imports " "}}' "${products[@]}")

# chain ROOT prints the shortest import chain from ROOT to a forbidden
# package, or nothing when there is none.
chain() {
	local -A parent=([$1]=)
	local queue=("$1") next=() p q
	while ((${#queue[@]})); do
		next=()
		for p in "${queue[@]}"; do
			for q in ${imports[$p]:-}; do
				[[ -v parent[$q] ]] && continue
				parent[$q]=$p
				if [[ $q =~ $forbidden ]]; then
					local path=$q
					while [ -n "${parent[$q]}" ]; do
						q=${parent[$q]}
						path="$q -> $path"
					done
					echo "${path//$module\//}"
					return
				fi
				next+=("$q")
			done
		done
		queue=("${next[@]}")
	done
}

bad=0
for root in $(go list "${products[@]}"); do
	if c=$(chain "$root") && [ -n "$c" ]; then
		echo "verify: product package ${root#"$module/"} depends on the benchmark, the simulator or its stand-in tokenizer: $c" >&2
		bad=1
	fi
done
if [ "$bad" = 1 ]; then
	echo "verify: product packages never import pkg/bench, pkg/sim or pkg/tokenizer; move what they need into a product package (token counting is pkg/tokencount), or register benchmark code from the benchmark's side (pkg/bench/livegateway)." >&2
	exit 1
fi
