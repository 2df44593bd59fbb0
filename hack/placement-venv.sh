#!/usr/bin/env bash
# Creates the virtualenv with real OpenStack Placement 16 that
# tests/placement_import.rs imports from and exports into (tests/support's
# harness starts it on SQLite on 127.0.0.1, as /work/shared/PEERS.md says).
# Idempotent: the venv is kept under ~/.cache/kubeplace and rebuilt only when
# the pinned version below changes (it is recorded in the venv). Needs python3
# with venv and access to PyPI.
#
#   hack/placement-venv.sh            # prints the venv's path
#   KUBEPLACE_PLACEMENT_VENV=DIR hack/placement-venv.sh
set -euo pipefail

exec "$(dirname "$0")/pinned-venv.sh" placement-venv \
  "${KUBEPLACE_PLACEMENT_VENV:-$HOME/.cache/kubeplace/placement-venv}" bin/placement-manage \
  "openstack-placement==16.0.0"
