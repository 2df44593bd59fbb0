#!/usr/bin/env bash
# Builds the two images the local cluster's node runs, from scratch with
# buildah (no daemon, no registry, no base image), as docker archives:
#   OUT/kubeplace.tar  the kubeplace binary, the shared libraries `ldd` lists
#                      for it and their loader; user 65532, entrypoint
#                      /usr/local/bin/kubeplace, command `run` (as the
#                      Dockerfile's distroless image)
#   OUT/pause.tar      hack/node/pause, a static Go binary
# Usage: hack/node/build-images.sh [--binary PATH] --image NAME --pause-image NAME --out DIR
# Without --binary (or with an empty one) it builds `cargo build --release`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'build-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

BINARY= IMAGE= PAUSE_IMAGE= OUT=
while (($#)); do
  case $1 in
    --binary) BINARY=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --pause-image) PAUSE_IMAGE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) die "unknown argument $1 (accepted: --binary, --image, --pause-image, --out)" ;;
  esac
done
[[ -n $IMAGE && -n $PAUSE_IMAGE && -n $OUT ]] || die "--image, --pause-image and --out are needed"

if [[ -z $BINARY ]]; then
  log "building kubeplace (cargo build --release)"
  (cd "$ROOT" && cargo build --release --locked --bin kubeplace >&2)
  BINARY="${CARGO_TARGET_DIR:-$ROOT/target}/release/kubeplace"
fi
[[ -x $BINARY ]] || die "no executable at $BINARY"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "$OUT/.work.XXXXXX")
trap 'buildah "${STORE[@]}" rm --all >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
# A store of its own, so nothing is left in the machine's container storage.
STORE=(--root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)

# image NAME ROOTFS ARCHIVE CONFIG...: commits ROOTFS as NAME into ARCHIVE.
image() {
  local name=$1 rootfs=$2 archive=$3 c
  shift 3
  c=$(buildah "${STORE[@]}" from scratch)
  buildah "${STORE[@]}" copy "$c" "$rootfs" / >/dev/null
  buildah "${STORE[@]}" config "$@" "$c"
  buildah "${STORE[@]}" commit --quiet "$c" "$name" >/dev/null
  rm -f "$archive"
  buildah "${STORE[@]}" push --quiet "$name" "docker-archive:$archive:$name"
  log "built $name into $archive"
}

# kubeplace: the binary where the Dockerfile puts it, and what it links.
R="$WORK/kubeplace-rootfs"
mkdir -p "$R/usr/local/bin" "$R/tmp"
chmod 1777 "$R/tmp"
# Stripped as the release profile strips (a test build carries debug info).
strip -o "$R/usr/local/bin/kubeplace" "$BINARY"
for lib in $(ldd "$BINARY" | grep -o '/[^ ]*'); do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
image "$IMAGE" "$R" "$OUT/kubeplace.tar" \
  --user 65532:65532 --entrypoint '["/usr/local/bin/kubeplace"]' --cmd run \
  --port 8443 --port 8080

# pause: cached by the hash of its source.
CACHE="${KUBEPLACE_CACHE:-${HOME:?}/.cache/kubeplace}/node"
HASH=$(cat "$ROOT"/hack/node/pause/* | sha256sum | cut -c1-16)
PAUSE="$CACHE/pause-$HASH"
if [[ ! -x $PAUSE ]]; then
  mkdir -p "$CACHE"
  (cd "$ROOT/hack/node/pause" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "$PAUSE" .)
fi
P="$WORK/pause-rootfs"
mkdir -p "$P"
cp "$PAUSE" "$P/pause"
image "$PAUSE_IMAGE" "$P" "$OUT/pause.tar" --user 65535:65535 --entrypoint '["/pause"]'
