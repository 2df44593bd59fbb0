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

exec "$(dirname "$0")/pinned-venv.sh" osc-venv \
  "${KUBEPLACE_OSC_VENV:-$HOME/.cache/kubeplace/osc-venv}" bin/openstack \
  "python-openstackclient==10.5.0" \
  "osc-placement==4.9.1"
