#!/usr/bin/env bash
# Makes sure the binaries of the test control plane exist, installing or building
# what is missing, and prints the directory to use as KUBEBUILDER_ASSETS.
#
#   etcd            Debian's etcd-server package (3.4)
#   kube-apiserver  built from k8s.io/kubernetes at $K8S_VERSION (hack/tools/kube-apiserver)
#   kubectl         built from the same module, so the client matches the server
#   kube-controller-manager  built from the same module: the real garbage collector
#                   (and, where a suite runs them, the other controllers)
#   kube-scheduler  built from the same module, for suites that run Deployments
#   kwok            sigs.k8s.io/kwok (hack/tools/kwok): plays the nodes, running
#                   scheduled Pods without containers (status, IPs, deletion)
#
# Binaries are cached outside the clone (IGW_CACHE_DIR, default ~/.cache/igw) so
# that every clone and CI run on the machine reuses them.
set -euo pipefail

K8S_VERSION=1.37.2
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${IGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/igw}"
assets="$cache/k8s/v$K8S_VERSION"
mkdir -p "$assets"

say() { echo "control-plane: $*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v etcd >/dev/null 2>&1; then
	say "installing etcd-server from Debian (once per machine)"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get install -y -q etcd-server >&2 || { as_root apt-get update -q >&2 && as_root apt-get install -y -q etcd-server >&2; }
	# The package starts a system etcd on the default ports; tests run their own.
	as_root systemctl disable --now etcd >/dev/null 2>&1 || true
fi
ln -sf "$(command -v etcd)" "$assets/etcd"

# Stamp the version so /version and `kubectl version` report it, as release builds do.
v=k8s.io/component-base/version
version_ldflags="-X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $v.gitTreeState=clean"

# One build at a time: concurrent runs (test packages, several clones) wait
# for the first instead of compiling the same binary side by side.
exec 9>"$assets/.build.lock"
for cmd in kube-apiserver kubectl kube-controller-manager kube-scheduler; do
	[ -x "$assets/$cmd" ] || flock 9
	if [ ! -x "$assets/$cmd" ]; then
		say "building $cmd v$K8S_VERSION (minutes on two cores the first time, cached afterwards)"
		start=$(date +%s)
		(cd "$root/hack/tools/kube-apiserver" && go build -ldflags "$version_ldflags" -o "$assets/$cmd.partial" "k8s.io/kubernetes/cmd/$cmd")
		mv "$assets/$cmd.partial" "$assets/$cmd"
		say "built $cmd in $(($(date +%s) - start))s"
	fi
done
[ -x "$assets/kwok" ] || flock 9
if [ ! -x "$assets/kwok" ]; then
	say "building kwok (a few minutes the first time, cached afterwards)"
	start=$(date +%s)
	(cd "$root/hack/tools/kwok" && go build -o "$assets/kwok.partial" sigs.k8s.io/kwok/cmd/kwok)
	mv "$assets/kwok.partial" "$assets/kwok"
	say "built kwok in $(($(date +%s) - start))s"
fi

echo "$assets"
