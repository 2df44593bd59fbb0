#!/usr/bin/env bash
# Starts etcd and kube-apiserver on 127.0.0.1 (free ports, everything in a
# temporary directory), checks that kubectl and helm work against them, and
# stops both again. Usage:
#   hack/controlplane/smoke-test.sh [BIN]
# BIN defaults to the output of hack/build-control-plane.sh. Needs openssl.
# Set KEEP=1 to leave the cluster running (it prints KUBECONFIG and the pids).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${1:-$("$HERE/../build-control-plane.sh" | tail -1)}
for b in etcd kube-apiserver kubectl helm; do
  [[ -x "$BIN/$b" ]] || { echo "smoke-test: no $BIN/$b" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "smoke-test: openssl is needed" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/kubeplace-cp.XXXXXX")
PIDS=()
cleanup() {
  local rc=$? i
  set +x
  if [[ ${KEEP:-0} == 1 && $rc == 0 ]]; then
    echo "smoke-test: left running: KUBECONFIG=$T/kubeconfig pids ${PIDS[*]}" >&2
    return
  fi
  # apiserver first: stopping etcd under it makes its shutdown wait ~15s.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null || true
    wait "${PIDS[i]}" 2>/dev/null || true
  done
  if [[ $rc != 0 ]]; then
    echo "--- etcd.log (tail)" >&2; tail -20 "$T/etcd.log" >&2 || true
    echo "--- kube-apiserver.log (tail)" >&2; tail -40 "$T/kube-apiserver.log" >&2 || true
  fi
  rm -rf "$T"
}
trap cleanup EXIT

# A port on 127.0.0.1 that nothing listens on now (bash's /dev/tcp).
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
ETCD_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
API_PORT=$(free_port)

# --- certificates: a CA, the apiserver's serving cert, an admin client cert
# (O=system:masters is bound to cluster-admin by RBAC's bootstrap policy) and
# the service-account signing key pair.
cd "$T"
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kubeplace-test-ca" \
  -keyout ca.key -out ca.crt
ossl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
  -keyout apiserver.key -out apiserver.csr
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n' > apiserver.ext
ossl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -days 2 -extfile apiserver.ext -out apiserver.crt
ossl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kubeplace-admin" \
  -keyout admin.key -out admin.csr
printf 'extendedKeyUsage=clientAuth\n' > admin.ext
ossl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -days 2 -extfile admin.ext -out admin.crt
ossl genrsa -out sa.key 2048
ossl rsa -in sa.key -pubout -out sa.pub

start=$SECONDS
# --- etcd: a single member, plain http on loopback; --unsafe-no-fsync because
# the data is thrown away.
"$BIN/etcd" \
  --name=kubeplace-test \
  --data-dir="$T/etcd-data" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="kubeplace-test=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync \
  --log-level=warn \
  >"$T/etcd.log" 2>&1 &
PIDS+=($!)

# --- kube-apiserver. --endpoint-reconciler-type=none: the default reconciler
# tries to publish 127.0.0.1 as the endpoint of Service "kubernetes", which
# validation rejects (loopback), and logs that error every few seconds.
"$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="$API_PORT" \
  --tls-cert-file="$T/apiserver.crt" \
  --tls-private-key-file="$T/apiserver.key" \
  --client-ca-file="$T/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$T/sa.pub" \
  --service-account-signing-key-file="$T/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --authorization-mode=RBAC \
  --endpoint-reconciler-type=none \
  --profiling=false \
  >"$T/kube-apiserver.log" 2>&1 &
PIDS+=($!)

# --- kubeconfig for the admin user
export KUBECONFIG="$T/kubeconfig"
K="$BIN/kubectl"
"$K" config set-cluster kubeplace-test --server="https://127.0.0.1:$API_PORT" \
  --certificate-authority="$T/ca.crt" --embed-certs >/dev/null
"$K" config set-credentials kubeplace-admin --client-certificate="$T/admin.crt" \
  --client-key="$T/admin.key" --embed-certs >/dev/null
"$K" config set-context kubeplace-test --cluster=kubeplace-test \
  --user=kubeplace-admin >/dev/null
"$K" config use-context kubeplace-test >/dev/null

for _ in $(seq 1 120); do
  if "$K" get --raw /readyz >/dev/null 2>&1; then break; fi
  for p in "${PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "smoke-test: pid $p exited" >&2; exit 1; }
  done
  sleep 0.5
done
"$K" get --raw /readyz >/dev/null
echo "smoke-test: apiserver ready after $((SECONDS - start))s on https://127.0.0.1:$API_PORT (etcd :$ETCD_PORT)"

set -x
"$K" version
"$K" get ns
"$K" api-resources | tail -n +2 | wc -l
"$K" auth whoami
"$BIN/helm" version
"$BIN/etcd" --version
# helm against the apiserver: a chart from `helm create`, installed and removed
# (no kube-controller-manager or kubelet run, so nothing becomes ready; no --wait).
cd "$T" && "$BIN/helm" create smoke >/dev/null
"$BIN/helm" install smoke "$T/smoke" --namespace smoke --create-namespace
"$BIN/helm" list --namespace smoke
"$K" get deploy,svc,sa -n smoke
"$BIN/helm" uninstall smoke --namespace smoke
set +x
echo "smoke-test: OK"
