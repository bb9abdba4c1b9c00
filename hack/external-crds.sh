#!/usr/bin/env bash
# Copies, unchanged, the third-party CRDs the operator's tests install (and the
# Helm chart documents) from the module versions pinned in go.mod into
# config/crd/external/<source>/. Run it after bumping one of those modules;
# `hack/external-crds.sh --check` fails when the copies are stale.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=config/crd/external
check=0
[ "${1:-}" = "--check" ] && check=1

moddir() { go list -m -f '{{.Dir}}' "$1"; }

gwapi=$(moddir sigs.k8s.io/gateway-api)
gie=$(moddir sigs.k8s.io/gateway-api-inference-extension)
eg=$(moddir github.com/envoyproxy/gateway)
# OLM's CRDs, for the quickstart's Subscription (test/quickstart): the module
# is not a requirement of go.mod, so its version is pinned here.
olm=$(go mod download -json github.com/operator-framework/api@v0.10.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')

# source-directory|target-subdirectory|file...
sets=(
	"$gwapi/config/crd/standard|gateway-api|gateway.networking.k8s.io_gatewayclasses.yaml gateway.networking.k8s.io_gateways.yaml gateway.networking.k8s.io_httproutes.yaml gateway.networking.k8s.io_referencegrants.yaml gateway.networking.k8s.io_backendtlspolicies.yaml"
	"$gie/config/crd/bases|inference-extension|inference.networking.k8s.io_inferencepools.yaml"
	"$olm/crds|olm|operators.coreos.com_catalogsources.yaml operators.coreos.com_operatorgroups.yaml operators.coreos.com_subscriptions.yaml"
	"$eg/charts/gateway-helm/charts/crds/crds/generated|envoy-gateway|gateway.envoyproxy.io_backends.yaml gateway.envoyproxy.io_backendtrafficpolicies.yaml gateway.envoyproxy.io_clienttrafficpolicies.yaml gateway.envoyproxy.io_envoyextensionpolicies.yaml gateway.envoyproxy.io_envoyproxies.yaml gateway.envoyproxy.io_httproutefilters.yaml gateway.envoyproxy.io_securitypolicies.yaml"
)

stale=0
for set in "${sets[@]}"; do
	IFS='|' read -r src sub files <<<"$set"
	mkdir -p "$dest/$sub"
	for f in $files; do
		if [ "$check" = 1 ]; then
			cmp -s "$src/$f" "$dest/$sub/$f" || { echo "external-crds: $dest/$sub/$f differs from $src/$f" >&2; stale=1; }
		else
			install -m 0644 "$src/$f" "$dest/$sub/$f"
		fi
	done
done
if [ "$stale" = 1 ]; then
	echo "external-crds: run hack/external-crds.sh and commit the result" >&2
	exit 1
fi
