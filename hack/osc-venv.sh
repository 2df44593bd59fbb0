#!/usr/bin/env bash
# Creates the virtualenv with python-openstackclient and osc-placement that
# tests/placement_osc.rs drives `kubeplace placement serve` with (a real
# Placement client). Idempotent: the venv is kept under ~/.cache/kubeplace and
# rebuilt only when the pinned versions below change (they are recorded in
# the venv). Needs python3 with venv and access to PyPI.
#
#   hack/osc-venv.sh            # prints the venv's path
#   KUBEPLACE_OSC_VENV=DIR hack/osc-venv.sh
set -euo pipefail

REQUIREMENTS=(
  "python-openstackclient==10.5.0"
  "osc-placement==4.9.1"
)
VENV=${KUBEPLACE_OSC_VENV:-$HOME/.cache/kubeplace/osc-venv}
STAMP=$VENV/.kubeplace-requirements
WANTED=$(printf '%s\n' "${REQUIREMENTS[@]}")

if [[ -x $VENV/bin/openstack && -f $STAMP && $(cat "$STAMP") == "$WANTED" ]]; then
  echo "$VENV"
  exit 0
fi

echo "osc-venv: creating $VENV (${REQUIREMENTS[*]})" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
# Record the versions last, so an interrupted install is redone.
printf '%s\n' "$WANTED" >"$STAMP"
echo "$VENV"
