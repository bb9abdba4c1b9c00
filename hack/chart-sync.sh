#!/usr/bin/env bash
# Copies, unchanged, what the Helm chart must share with the generated manifests:
# the CRDs (config/crd/bases -> charts/igw/crds) and the operator's ClusterRole
# (config/rbac/role.yaml -> charts/igw/files/manager-role.yaml, whose rules the
# chart's ClusterRole template reads). `make manifests` runs it after
# controller-gen; hack/verify.sh fails when the copies are stale.
set -euo pipefail
cd "$(dirname "$0")/.."

chart=charts/igw
rm -f "$chart"/crds/*.yaml
mkdir -p "$chart/crds" "$chart/files"
cp config/crd/bases/*.yaml "$chart/crds/"
cp config/rbac/role.yaml "$chart/files/manager-role.yaml"
