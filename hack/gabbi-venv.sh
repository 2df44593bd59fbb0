#!/usr/bin/env bash
# Creates the virtualenv that hack/gabbi/run.py (and tests/placement_gabbi.rs) run
# Placement's own gabbi files in: real Placement 16.0.0, whose package carries the
# gabbi files and the fixtures that build each file's state, gabbi to run them, and
# the test libraries those fixtures import. Idempotent: kept under ~/.cache/kubeplace
# and rebuilt only when the pins below change. Needs python3 with venv and PyPI.
#
#   hack/gabbi-venv.sh          # prints the venv's path
#   KUBEPLACE_GABBI_VENV=DIR hack/gabbi-venv.sh
set -euo pipefail

VENV=${KUBEPLACE_GABBI_VENV:-$HOME/.cache/kubeplace/gabbi-venv}
"$(dirname "$0")/pinned-venv.sh" gabbi-venv "$VENV" bin/gabbi-run \
  "openstack-placement==16.0.0" \
  "gabbi==4.2.3" \
  "fixtures==4.3.2" \
  "oslotest==6.1.1" >/dev/null
# The fixtures must import: fail here rather than in the first gabbi file.
"$VENV/bin/python" -c 'import gabbi.driver, placement.tests.functional.fixtures.gabbits'
echo "$VENV"
