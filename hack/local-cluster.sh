#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine, for trying kubeplace for real
# and for the end-to-end tests that run it in pods: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, CoreDNS and a node (containerd
# with runc, CNI bridge networking, kubelet, kube-proxy), all built or
# installed here with no registry and no download of prebuilt binaries.
#
#   hack/local-cluster.sh up   [--dir DIR] [--binary PATH] [--install]
#   hack/local-cluster.sh down [--dir DIR]
#
# `up` starts everything into DIR (default /tmp/kubeplace-local-cluster),
# builds the kubeplace image from PATH (default: a release build of this
# repository) and loads it into the node's containerd as kubeplace:<version>,
# waits until the node is Ready, and prints the line to export KUBECONFIG.
# With --install it also runs `helm install kubeplace charts/kubeplace` with
# that image and waits for the Deployment. `down` stops everything `up`
# started and removes DIR.
#
# Needs root (kubelet and containerd manage cgroups, mounts and network
# namespaces) and Debian's containerd, runc, containernetworking-plugins,
# buildah, iptables and conntrack (hack/node/README.md). Only one such cluster
# runs at a time: the node uses the machine's fixed ports 10249, 10250 and
# 10256, and port 53 of the host's address (CoreDNS).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_NAME=kubeplace-node
POD_CIDR=10.88.0.0/16
SERVICE_CIDR=10.0.0.0/24
BRIDGE=kp0

log() { printf 'local-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cmd=${1:-}
[[ $cmd == up || $cmd == down ]] || die "usage: $0 up|down [--dir DIR] [--binary PATH] [--install]"
shift
DIR=/tmp/kubeplace-local-cluster
BINARY=
INSTALL=0
while (($#)); do
  case $1 in
    --dir) DIR=$2; shift 2 ;;
    --binary) BINARY=$2; shift 2 ;;
    --install) INSTALL=1; shift ;;
    *) die "unknown argument $1 (accepted: --dir DIR, --binary PATH, --install)" ;;
  esac
done
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
CTR_SOCK="$DIR/containerd/containerd.sock"

# ---------------------------------------------------------------------------
# down

# Stops the daemons (kubelet first, so it restarts no container), kills the
# containers' shims, unmounts what kubelet and containerd mounted under DIR,
# and removes kube-proxy's rules and the bridge.
down() {
  # Best effort from here on: every step runs whatever failed before it.
  set +e +o pipefail
  local pid netns=()
  # The pods' network namespaces, asked of containerd before it stops: they
  # live outside DIR (/var/run/netns) and nothing else removes them.
  if [[ -S $CTR_SOCK ]]; then
    local id
    for id in $(ctr --address "$CTR_SOCK" -n k8s.io containers ls -q 2>/dev/null); do
      netns+=($(ctr --address "$CTR_SOCK" -n k8s.io containers info "$id" 2>/dev/null \
        | grep -o '/var/run/netns/cni-[0-9a-f-]*' | head -1))
    done
  fi
  if [[ -f $DIR/pids ]]; then
    for pid in $(tac "$DIR/pids"); do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
      local alive=0
      for pid in $(cat "$DIR/pids"); do kill -0 "$pid" 2>/dev/null && alive=1; done
      ((alive)) || break
      sleep 0.2
    done
    for pid in $(cat "$DIR/pids"); do kill -9 "$pid" 2>/dev/null || true; done
    rm -f "$DIR/pids"
  fi
  pkill -9 -f -- "-address $CTR_SOCK" 2>/dev/null || true
  # The containers outlive their shims: kill every process in the pods'
  # cgroups (kubelet's cgroupfs hierarchy, kubepods), then remove the cgroups.
  local procs
  for procs in $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs 2>/dev/null); do
    for pid in $(cat "$procs"); do kill -9 "$pid" 2>/dev/null; done
  done
  for _ in $(seq 1 20); do
    [[ -z $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null) ]] && break
    sleep 0.2
  done
  find /sys/fs/cgroup/*/kubepods -depth -type d -exec rmdir {} + 2>/dev/null
  local m
  for _ in 1 2 3; do
    while read -r m; do umount -l "$m" 2>/dev/null || true; done \
      < <(awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
  done
  local ns
  for ns in "${netns[@]}"; do
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  if [[ -x ${BIN:-}/kube-proxy ]]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  # kubelet's own chains, which kube-proxy's cleanup leaves.
  local table chain
  local tool
  for tool in iptables ip6tables; do
    for table in filter nat mangle; do
      "$tool" -t "$table" -D INPUT -j KUBE-FIREWALL 2>/dev/null || true
      "$tool" -t "$table" -D OUTPUT -j KUBE-FIREWALL 2>/dev/null || true
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$tool" -t "$table" -F "$chain" 2>/dev/null && "$tool" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "$DIR"
}

if [[ $cmd == down ]]; then
  BIN=$("$ROOT/hack/build-control-plane.sh" 2>/dev/null | tail -1) || true
  down
  log "stopped and removed $DIR"
  exit 0
fi

# ---------------------------------------------------------------------------
# up

[[ $(id -u) == 0 ]] || die "run as root: kubelet and containerd need it"
for tool in containerd containerd-shim-runc-v2 ctr runc buildah iptables conntrack openssl ip; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] \
    || die "$tool is missing (apt-get install containerd runc containernetworking-plugins buildah iptables conntrack openssl iproute2)"
done
[[ -x /usr/lib/cni/bridge ]] || die "CNI plugins are missing (apt-get install containernetworking-plugins)"
[[ -s $DIR/pids ]] && die "$DIR already holds a running cluster (hack/local-cluster.sh down --dir $DIR)"

BIN=$("$ROOT/hack/build-control-plane.sh" | tail -1)
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
IMAGE="kubeplace:$VERSION"
PAUSE_IMAGE=localhost/kubeplace-pause:1

# The address pods reach the API server at: the one the default route leaves by.
HOST_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[[ -n $HOST_IP ]] || die "no IPv4 default route: pods need an address of this host to reach the API server"

# Below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
# default): a port there may be taken as the source port of an outgoing connection between
# this check and etcd's bind, which no check can see coming.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
ETCD_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
API_PORT=$(free_port)
API="https://$HOST_IP:$API_PORT"

# start NAME CMD...: runs CMD in its own session, output in DIR/NAME.log, pid
# appended to DIR/pids.
start() {
  local name=$1
  shift
  setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  echo $! >>"$DIR/pids"
}

fail_with_logs() {
  log "error: $*"
  local f
  for f in "$DIR"/*.log; do
    printf -- '--- %s\n' "$f" >&2
    tail -15 "$f" >&2
  done
  exit 1
}

# wait_for WHAT SECONDS CMD...: retries CMD every half second.
wait_for() {
  local what=$1 seconds=$2 i
  shift 2
  for ((i = 0; i < seconds * 2; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  fail_with_logs "$what not after ${seconds}s"
}

# --- certificates: a CA; the API server's serving certificate; a client
# certificate for each component, named as RBAC's bootstrap policy expects.
mkdir -p "$DIR/pki"
cd "$DIR/pki"
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=kubeplace-local-ca" -keyout ca.key -out ca.crt
# cert NAME SUBJECT EXTENSIONS
cert() {
  ossl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$1.ext" -out "$1.crt"
}
cert apiserver "/CN=kube-apiserver" \
  "subjectAltName=IP:127.0.0.1,IP:$HOST_IP,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
cert admin "/O=system:masters/CN=kubeplace-admin" "extendedKeyUsage=clientAuth"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
cert kubelet-serving "/CN=$NODE_NAME" "subjectAltName=IP:$HOST_IP,DNS:$NODE_NAME
extendedKeyUsage=serverAuth"
cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
ossl genrsa -out sa.key 2048
ossl rsa -in sa.key -pubout -out sa.pub
cd "$ROOT"

# kubeconfig NAME CERT: a kubeconfig for the component with that certificate.
kubeconfig() {
  local out="$DIR/$1.kubeconfig"
  KUBECONFIG=$out "$BIN/kubectl" config set-cluster local --server="$API" \
    --certificate-authority="$DIR/pki/ca.crt" --embed-certs >/dev/null
  KUBECONFIG=$out "$BIN/kubectl" config set-credentials "$2" \
    --client-certificate="$DIR/pki/$2.crt" --client-key="$DIR/pki/$2.key" --embed-certs >/dev/null
  KUBECONFIG=$out "$BIN/kubectl" config set-context local --cluster=local --user="$2" >/dev/null
  KUBECONFIG=$out "$BIN/kubectl" config use-context local >/dev/null
}
kubeconfig admin admin
for c in kubelet kube-proxy controller-manager scheduler; do kubeconfig "$c" "$c"; done
export KUBECONFIG="$DIR/admin.kubeconfig"
K="$BIN/kubectl"

# --- etcd and the control plane
start etcd "$BIN/etcd" --name=local --data-dir="$DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --log-level=warn
# DRA's consumable capacity (alpha in 1.35): devices a driver lets several claims
# share, which kubeplace mirrors by their capacity (docs/mirror.md).
FEATURE_GATES=DRAConsumableCapacity=true
# Pods reach the API server through Service "kubernetes", whose endpoint is
# --advertise-address; webhooks are called through their Services' cluster IPs,
# which kube-proxy's rules route to the pods.
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=0.0.0.0 --advertise-address="$HOST_IP" --secure-port="$API_PORT" \
  --tls-cert-file="$DIR/pki/apiserver.crt" --tls-private-key-file="$DIR/pki/apiserver.key" \
  --client-ca-file="$DIR/pki/ca.crt" \
  --kubelet-client-certificate="$DIR/pki/admin.crt" --kubelet-client-key="$DIR/pki/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$DIR/pki/sa.pub" \
  --service-account-signing-key-file="$DIR/pki/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --feature-gates="$FEATURE_GATES" --profiling=false
wait_for "kube-apiserver ready" 120 "$K" get --raw /readyz
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$DIR/controller-manager.kubeconfig" \
  --service-account-private-key-file="$DIR/pki/sa.key" --root-ca-file="$DIR/pki/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=0 --profiling=false
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$DIR/scheduler.kubeconfig" --feature-gates="$FEATURE_GATES" \
  --authentication-kubeconfig="$DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig="$DIR/scheduler.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --profiling=false

# --- cluster DNS: CoreDNS on this host, answering for Services and forwarding
# the rest to this host's resolvers. Pods get HOST_IP as their nameserver.
# It reads Services as the admin: this cluster is one person's playground.
cat >"$DIR/Corefile" <<EOF
.:53 {
    bind $HOST_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $DIR/admin.kubeconfig local
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
}
EOF
start coredns "$BIN/coredns" -conf "$DIR/Corefile"

# --- the node: networking. Pods talk only to this host (the API server,
# CoreDNS) and to each other, so no masquerading: nothing is left in the nat
# table when the cluster stops.
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null \
  || log "net.bridge.bridge-nf-call-iptables is not settable: a pod reaching a Service on its own node may fail"
mkdir -p "$DIR/cni/net.d" "$DIR/cni/ipam"
cat >"$DIR/cni/net.d/10-kubeplace.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kubeplace-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/ipam",
        "ranges": [[{ "subnet": "$POD_CIDR" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF

# --- containerd with runc (crun does not run on a cgroup v1 host with a
# hybrid unified mount) and cgroupfs, as kubelet is configured below.
mkdir -p "$DIR/containerd"
CAP_EFF=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
RESTRICT_OOM=false
(((0x$CAP_EFF >> 24) & 1)) || RESTRICT_OOM=true # bit 24: CAP_SYS_RESOURCE
cat >"$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CTR_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Keeps containers' oom_score_adj at or above containerd's own: a sandbox
  # without CAP_SYS_RESOURCE (a VM's or CI's root often lacks it) cannot lower it.
  restrict_oom_score_adj = $RESTRICT_OOM
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "${KUBEPLACE_RUNC:-$(command -v runc || echo /usr/sbin/runc)}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
start containerd containerd --config "$DIR/containerd/config.toml"
wait_for "containerd" 30 ctr --address "$CTR_SOCK" version

# --- images: built from scratch with buildah (no registry, no base image) and
# imported into containerd's k8s.io namespace, where kubelet finds them.
"$ROOT/hack/node/build-images.sh" --binary "${BINARY:-}" --image "$IMAGE" \
  --pause-image "$PAUSE_IMAGE" --out "$DIR/images" >&2
for tar in "$DIR"/images/*.tar; do
  ctr --address "$CTR_SOCK" -n k8s.io images import --all-platforms "$tar" >&2
done

# --- kubelet: cgroup v1 must be allowed explicitly since Kubernetes 1.35, and
# disk eviction is off ("0%" turns a signal off): a developer's or a CI
# machine's disk is often fuller than any threshold would allow, and under
# DiskPressure the node takes no pods at all. This node's pods write nothing.
mkdir -p "$DIR/kubelet"
cat >"$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$DIR/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: "unix://$CTR_SOCK"
tlsCertFile: "$DIR/pki/kubelet-serving.crt"
tlsPrivateKeyFile: "$DIR/pki/kubelet-serving.key"
readOnlyPort: 0
healthzPort: 0
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%", imagefs.inodesFree: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
clusterDNS: ["$HOST_IP"]
clusterDomain: cluster.local
EOF
start kubelet "$BIN/kubelet" --config="$DIR/kubelet/config.yaml" \
  --kubeconfig="$DIR/kubelet.kubeconfig" --hostname-override="$NODE_NAME" \
  --node-ip="$HOST_IP" --root-dir="$DIR/kubelet/root" --cert-dir="$DIR/kubelet/pki"

cat >"$DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$DIR/kube-proxy.kubeconfig"}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
start kube-proxy "$BIN/kube-proxy" --config="$DIR/kube-proxy.yaml"

wait_for "node $NODE_NAME Ready" 120 "$K" wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
# Pods need the default ServiceAccount, which the controller manager makes.
wait_for "ServiceAccount default" 60 "$K" get serviceaccount default -n default
log "node $NODE_NAME is Ready; image $IMAGE loaded; logs in $DIR/*.log; $(df -h --output=avail "$DIR" | tail -1 | tr -d ' ') free on its disk"

if ((INSTALL)); then
  "$BIN/helm" install kubeplace "$ROOT/charts/kubeplace" --namespace kubeplace-system \
    --create-namespace --set image.repository=kubeplace --set image.tag="$VERSION" \
    --set image.pullPolicy=Never --wait --timeout 5m >&2
fi

echo "export KUBECONFIG=$DIR/admin.kubeconfig PATH=$BIN:\$PATH"
