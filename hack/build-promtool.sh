#!/usr/bin/env bash
# Builds Prometheus' promtool from its Go module (the Go module proxy is the only source
# needed), to check the chart's alerting rules: `promtool check rules` and `promtool test
# rules` (tests/chart_monitoring.rs). The version is pinned by hack/promtool/go.mod and
# go.sum.
#
# The binary goes to
#   ${KUBEPLACE_CACHE:-$HOME/.cache/kubeplace}/promtool/<version>/promtool
# and is built only when it is not there. Progress goes to stderr; the last line of stdout
# is the binary's path:
#   PROMTOOL=$(hack/build-promtool.sh | tail -1)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD="$ROOT/hack/promtool"

log() { printf 'build-promtool: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "go is not on PATH"

VERSION=$(awk '$1 == "github.com/prometheus/prometheus" { print $2 }' "$MOD/go.mod")
[[ -n $VERSION ]] || die "cannot read Prometheus' version from $MOD/go.mod"

CACHE="${KUBEPLACE_CACHE:-${HOME:?}/.cache/kubeplace}"
OUT="$CACHE/promtool/$VERSION"
BIN="$OUT/promtool"

if [[ -x $BIN ]]; then
  log "up to date: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$OUT"
# Serialise concurrent builds; the one that waited finds the binary in place.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$OUT/.lock"
  flock 9
  if [[ -x $BIN ]]; then
    log "up to date: $BIN"
    echo "$BIN"
    exit 0
  fi
fi

export CGO_ENABLED=0 GOWORK=off
export GOFLAGS="-trimpath -mod=readonly"
TMP=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

start=$SECONDS
log "building promtool $VERSION (go: $(go env GOVERSION))"
cd "$MOD"
go build -ldflags "-s -w" -o "$TMP/promtool" github.com/prometheus/prometheus/cmd/promtool
mv -f "$TMP/promtool" "$BIN"
log "built promtool $VERSION in $((SECONDS - start))s"
echo "$BIN"
