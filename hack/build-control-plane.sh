#!/usr/bin/env bash
# Builds a real Kubernetes control plane and node for end-to-end tests from Go
# modules (the Go module proxy is the only source needed): kube-apiserver,
# kubectl, and the node's kubelet, kube-proxy, kube-controller-manager and
# kube-scheduler (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3) and helm. The versions
# are pinned by the go.mod/go.sum files under hack/controlplane/.
#
# The binaries go to
#   ${KUBEPLACE_CACHE:-$HOME/.cache/kubeplace}/controlplane/<key>/bin/
# where <key> names the versions (k8s-X_etcd-Y_helm-Z). When all four binaries
# are already there nothing is built; otherwise only the missing ones are. Progress goes to stderr; the last line
# of stdout is the bin directory:
#   BIN=$(hack/build-control-plane.sh | tail -1)
# A cold build is 18 CPU-minutes: about 10-15 min wall on 2 idle cores, 30 min
# on a busy machine (hack/controlplane/README.md). Go's own GOCACHE and
# GOMODCACHE are used as they are set.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CP="$ROOT/hack/controlplane"

log() { printf 'build-control-plane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "go is not on PATH"

# modver DIR MODULE: the version of MODULE that DIR/go.mod requires.
modver() {
  awk -v m="$2" '
    $1 == "require" && $2 == m { v = $3 }
    $1 == m && $2 != "=>"      { v = $2 }
    END { print v }' "$1/go.mod"
}

K8S_VERSION=$(modver "$CP/kubernetes" k8s.io/kubernetes)
ETCD_VERSION=$(modver "$CP/etcd" go.etcd.io/etcd/server/v3)
HELM_VERSION=$(modver "$CP/helm" helm.sh/helm/v4)
COREDNS_VERSION=$(modver "$CP/coredns" github.com/coredns/coredns)
[[ -n $K8S_VERSION && -n $ETCD_VERSION && -n $HELM_VERSION && -n $COREDNS_VERSION ]] \
  || die "cannot read the pinned versions from $CP/*/go.mod"

KEY="k8s-${K8S_VERSION#v}_etcd-${ETCD_VERSION#v}_helm-${HELM_VERSION#v}_coredns-${COREDNS_VERSION#v}"
CACHE="${KUBEPLACE_CACHE:-${HOME:?}/.cache/kubeplace}"
OUT="$CACHE/controlplane/$KEY"
BIN="$OUT/bin"
K8S_BINARIES=(kube-apiserver kubectl kubelet kube-proxy kube-controller-manager kube-scheduler)
BINARIES=("${K8S_BINARIES[@]}" etcd helm coredns)

# missing NAME...: whether one of these binaries is not built yet.
missing() {
  local b
  for b in "$@"; do [[ -x "$BIN/$b" ]] || return 0; done
  return 1
}
complete() { ! missing "${BINARIES[@]}"; }

if complete; then
  log "up to date: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
# Serialise concurrent builds of the same key; the one that waited finds the
# binaries in place.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$OUT/.lock"
  flock 9
  if complete; then
    log "up to date: $BIN"
    echo "$BIN"
    exit 0
  fi
fi

# Static, path-independent, stripped binaries (as the upstream release builds
# are); -mod=readonly so a go.mod/go.sum that is out of date fails loudly.
export CGO_ENABLED=0 GOWORK=off
export GOFLAGS="-trimpath -mod=readonly"
LDSTRIP="-s -w"

TMP=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# CoreDNS, the local cluster's DNS (hack/local-cluster.sh); its root package
# is its main, with every plugin of its default plugin.cfg.
build_coredns() {
  cd "$CP/coredns"
  go build -ldflags "$LDSTRIP" -o "$TMP/coredns" github.com/coredns/coredns
}

timed() {
  local what=$1 start=$SECONDS
  shift
  log "building $what"
  "$@" >&2
  log "built $what in $((SECONDS - start))s"
}

log "building $KEY into $BIN (go: $(go env GOVERSION))"
total_start=$SECONDS

# The Kubernetes binaries, with the version stamps hack/lib/version.sh sets
# (kubectl version, version-skew checks and helm's kubeVersion checks read
# them) and the build tags hack/lib/golang.sh uses for release builds.
build_kubernetes() {
  cd "$CP/kubernetes"
  go mod download k8s.io/kubernetes
  local info date commit major minor rest
  info=$(go mod download -json k8s.io/kubernetes | sed -n 's/.*"Info": "\(.*\)",*/\1/p')
  commit=$(sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$info" 2>/dev/null || true)
  date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  IFS=. read -r major minor rest <<<"${K8S_VERSION#v}"
  local ld=() key val
  for kv in "gitVersion=$K8S_VERSION" "gitMajor=$major" "gitMinor=$minor" \
            "gitCommit=$commit" "gitTreeState=clean" "buildDate=$date"; do
    key=${kv%%=*} val=${kv#*=}
    ld+=("-X k8s.io/component-base/version.$key=$val"
         "-X k8s.io/client-go/pkg/version.$key=$val")
  done
  go build -tags selinux,notest,grpcnotrace -ldflags "$LDSTRIP ${ld[*]}" \
    -o "$TMP/" "${K8S_BINARIES[@]/#/k8s.io/kubernetes/cmd/}"
}

build_etcd() {
  cd "$CP/etcd"
  go build -ldflags "$LDSTRIP" -o "$TMP/etcd" go.etcd.io/etcd/server/v3
}

# helm's Makefile stamps the version this way for a tagged release.
build_helm() {
  cd "$CP/helm"
  go build -ldflags "$LDSTRIP -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$TMP/helm" helm.sh/helm/v4/cmd/helm
}

built=()
if missing etcd; then timed "etcd $ETCD_VERSION" build_etcd; built+=(etcd); fi
if missing helm; then timed "helm $HELM_VERSION" build_helm; built+=(helm); fi
if missing coredns; then timed "coredns $COREDNS_VERSION" build_coredns; built+=(coredns); fi
if missing "${K8S_BINARIES[@]}"; then
  timed "${K8S_BINARIES[*]} $K8S_VERSION" build_kubernetes
  built+=("${K8S_BINARIES[@]}")
fi

for b in "${built[@]}"; do
  [[ -x "$TMP/$b" ]] || die "$b was not built"
  mv -f "$TMP/$b" "$BIN/$b"
done
cat >"$OUT/versions" <<EOF
kubernetes $K8S_VERSION
etcd $ETCD_VERSION
helm $HELM_VERSION
coredns $COREDNS_VERSION
go $(go env GOVERSION)
EOF
log "built $KEY in $((SECONDS - total_start))s"
echo "$BIN"
