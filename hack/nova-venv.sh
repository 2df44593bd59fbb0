#!/usr/bin/env bash
# Creates the virtualenv with Nova that tests/placement_nova.rs drives
# `kubeplace placement serve` with: hack/nova-report-client.py runs Nova's own
# Placement client (nova.scheduler.client.report.SchedulerReportClient) from
# it. Idempotent: the venv is kept under ~/.cache/kubeplace and rebuilt only
# when the pinned versions below change (they are recorded in the venv). Needs
# python3 (3.10 or later) with venv and access to PyPI; Nova and its
# dependencies take about 13 minutes to install on a busy 2-core machine.
#
#   hack/nova-venv.sh            # prints the venv's path
#   KUBEPLACE_NOVA_VENV=DIR hack/nova-venv.sh
set -euo pipefail

REQUIREMENTS=(
  "nova==34.0.0"
)
VENV=${KUBEPLACE_NOVA_VENV:-$HOME/.cache/kubeplace/nova-venv}
STAMP=$VENV/.kubeplace-requirements
WANTED=$(printf '%s\n' "${REQUIREMENTS[@]}")

if [[ -x $VENV/bin/python && -f $STAMP && $(cat "$STAMP") == "$WANTED" ]]; then
  echo "$VENV"
  exit 0
fi

echo "nova-venv: creating $VENV (${REQUIREMENTS[*]})" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
# Record the versions last, so an interrupted install is redone.
printf '%s\n' "$WANTED" >"$STAMP"
echo "$VENV"
