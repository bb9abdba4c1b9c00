#!/usr/bin/env bash
# Copies, unchanged, what the Helm chart must share with the generated manifests:
# the CRDs (config/crd/bases -> charts/igw/crds) and the operator's ClusterRole
# (config/rbac/role.yaml -> charts/igw/files/manager-role.yaml, whose rules the
# chart's ClusterRole template reads), and the other ClusterRoles of
# config/rbac (files/rbac). `make manifests` runs it after
# controller-gen; hack/verify.sh fails when the copies are stale. Also the
# alerts and the dashboard, below.
set -euo pipefail
cd "$(dirname "$0")/.."

chart=charts/igw
rm -f "$chart"/crds/*.yaml
mkdir -p "$chart/crds" "$chart/files"
cp config/crd/bases/*.yaml "$chart/crds/"
cp config/rbac/role.yaml "$chart/files/manager-role.yaml"
# The other ClusterRoles (metrics authentication and reading, and the roles
# aggregated into admin, edit and view), whose rules and labels the chart's
# rbac templates read.
rm -rf "$chart/files/rbac"
mkdir -p "$chart/files/rbac"
for role in metrics_auth_role metrics_reader_role \
	inferencegatewayconfig_editor_role inferencegatewayconfig_viewer_role modelroute_editor_role modelroute_viewer_role; do
	cp "config/rbac/$role.yaml" "$chart/files/rbac/"
done
# The alerts and the Grafana dashboard (config/prometheus -> charts/igw/files),
# which the chart's monitoring templates read.
mkdir -p "$chart/files/grafana"
cp config/prometheus/prometheusrule.yaml "$chart/files/prometheus-rules.yaml"
cp config/prometheus/dashboards/igw.json "$chart/files/grafana/igw.json"
