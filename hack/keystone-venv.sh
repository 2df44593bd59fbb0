#!/usr/bin/env bash
# Creates the virtualenv with a real OpenStack Keystone that tests/placement_keystone.rs
# (through tests/support/keystone.rs and hack/keystone-serve.py) validates tokens
# against. Idempotent: kept under ~/.cache/kubeplace and rebuilt only when the pins
# below change (they are recorded in the venv). Needs python3 with venv and access to
# PyPI. Keystone 30 is the release of the same OpenStack series as Placement 16.
#
#   hack/keystone-venv.sh            # prints the venv's path
#   KUBEPLACE_KEYSTONE_VENV=DIR hack/keystone-venv.sh
set -euo pipefail

VENV=${KUBEPLACE_KEYSTONE_VENV:-$HOME/.cache/kubeplace/keystone-venv}
"$(dirname "$0")/pinned-venv.sh" keystone-venv "$VENV" bin/keystone-manage \
  "keystone==30.0.0" >/dev/null
# The public WSGI application must import: fail here rather than in the first test.
"$VENV/bin/python" -W ignore -c 'import keystone.server.wsgi'
echo "$VENV"
