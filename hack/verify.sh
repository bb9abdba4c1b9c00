#!/usr/bin/env bash
# Fails when go.mod/go.sum are not tidy, generated files are stale, Go code
# is not gofmt'ed, a product package depends on the benchmark, the simulator
# or its stand-in tokenizer (hack/import-rule.sh), or go vet or staticcheck
# (a tool in go.mod, its default checks) complains.
# It regenerates into the tree, compares with what was there, and puts the old
# files back, so running it never changes the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! untidy=$(go mod tidy -diff 2>&1); then
	echo "verify: go.mod or go.sum is not tidy; run 'go mod tidy' and commit the result:" >&2
	echo "$untidy" | head -40 >&2
	exit 1
fi

generated=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml bundle charts/igw/crds charts/igw/files/manager-role.yaml charts/igw/files/rbac charts/igw/files/prometheus-rules.yaml charts/igw/files/grafana)
snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
for p in "${generated[@]}"; do
	if [ -e "$p" ]; then mkdir -p "$snapshot/$(dirname "$p")" && cp -r "$p" "$snapshot/$p"; fi
done

make -s generate manifests >/dev/null
stale=0
for p in "${generated[@]}"; do
	if ! diff -ruN "$snapshot/$p" "$p" >"$snapshot/diff" 2>&1; then
		echo "verify: $p is stale; run 'make generate manifests' and commit the result:" >&2
		head -40 "$snapshot/diff" >&2
		stale=1
	fi
done
if [ "$stale" = 1 ]; then
	for p in "${generated[@]}"; do
		rm -rf "$p"
		if [ -e "$snapshot/$p" ]; then cp -r "$snapshot/$p" "$p"; fi
	done
	exit 1
fi

unformatted=$(gofmt -l $(git ls-files '*.go' --cached --others --exclude-standard))
if [ -n "$unformatted" ]; then
	echo "verify: not gofmt'ed (run 'make fmt'):" >&2
	echo "$unformatted" >&2
	exit 1
fi

hack/import-rule.sh
go vet ./...
if ! lint=$(go tool staticcheck ./... 2>&1); then
	echo "verify: staticcheck findings (fix them, or for a false positive add //lint:ignore CHECK reason on the line):" >&2
	echo "$lint" >&2
	exit 1
fi
echo "verify: ok"
