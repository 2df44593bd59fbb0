#!/usr/bin/env bash
# Creates the virtualenv with real OpenStack Placement 16 that kubeplace is tested
# against: tests/placement_import.rs imports from it and exports into it
# (hack/placement-serve.py serves it on SQLite on 127.0.0.1), and hack/gabbi/run.py
# (tests/placement_gabbi.rs, tests/e2e/gabbi.rs) runs the gabbi files its package
# carries, with gabbi and the test libraries their fixtures import; PyMySQL lets
# benches/cluster_claims.rs serve it on MariaDB. Idempotent: kept
# under ~/.cache/kubeplace and rebuilt only when the pins below change (they are
# recorded in the venv). Needs python3 with venv and access to PyPI.
#
#   hack/placement-venv.sh            # prints the venv's path
#   KUBEPLACE_PLACEMENT_VENV=DIR hack/placement-venv.sh
set -euo pipefail

VENV=${KUBEPLACE_PLACEMENT_VENV:-$HOME/.cache/kubeplace/placement-venv}
"$(dirname "$0")/pinned-venv.sh" placement-venv "$VENV" bin/placement-manage \
  "openstack-placement==16.0.0" \
  "gabbi==4.2.3" \
  "fixtures==4.3.2" \
  "oslotest==6.1.1" \
  "PyMySQL==1.2.4" >/dev/null
# The gabbi files' fixtures must import: fail here rather than in the first file.
"$VENV/bin/python" -c 'import gabbi.driver, placement.tests.functional.fixtures.gabbits'
echo "$VENV"
