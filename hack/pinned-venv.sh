#!/usr/bin/env bash
# Shared by hack/osc-venv.sh and hack/nova-venv.sh: makes a virtualenv with
# pinned requirements, or reuses it when the pins recorded in it are the same.
#
#   hack/pinned-venv.sh LABEL VENV CHECK REQUIREMENT...
#
# CHECK is a file under VENV that a complete install has (bin/openstack). The
# venv's path is printed on standard output; progress goes to standard error.
set -euo pipefail

LABEL=$1 VENV=$2 CHECK=$3
shift 3
STAMP=$VENV/.kubeplace-requirements
WANTED=$(printf '%s\n' "$@")

if [[ -e $VENV/$CHECK && -f $STAMP && $(cat "$STAMP") == "$WANTED" ]]; then
  echo "$VENV"
  exit 0
fi

echo "$LABEL: creating $VENV ($*)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "$@"
# Record the versions last, so an interrupted install is redone.
printf '%s\n' "$WANTED" >"$STAMP"
echo "$VENV"
