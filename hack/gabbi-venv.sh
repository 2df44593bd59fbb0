#!/usr/bin/env bash
# Creates the virtualenv that run.py (Placement's gabbits against kubeplace)
# runs in: real Placement 16.0.0, whose wheel ships the gabbit files and the
# fixtures that build each file's state, gabbi to run them, and the test-only
# libraries those fixtures import (fixtures, oslotest; oslo.db's test fixtures
# need testresources and testscenarios, which oslo.db already requires).
# wsgi-intercept is not needed: the fixture state is read through Placement's
# WSGI app directly and the tests go over real HTTP.
#
# Idempotent: the venv is kept under ~/.cache/kubeplace and rebuilt only when
# the pins below change (they are recorded in the venv, as hack/pinned-venv.sh
# does). Quiet unless failing; prints the venv's path. Needs python3 with venv
# and access to PyPI (about 20 s with pip's cache filled).
#
#   ./venv.sh                        # prints the venv's path
#   KUBEPLACE_GABBI_VENV=DIR ./venv.sh
set -euo pipefail

VENV=${KUBEPLACE_GABBI_VENV:-$HOME/.cache/kubeplace/gabbi-venv}
CHECK=bin/python
PINS=(
  "openstack-placement==16.0.0"
  "gabbi==4.2.3"
  "fixtures==4.3.2"
  "oslotest==6.1.1"
)

STAMP=$VENV/.kubeplace-requirements
WANTED=$(printf '%s\n' "${PINS[@]}")

if [[ -e $VENV/$CHECK && -f $STAMP && $(cat "$STAMP") == "$WANTED" ]]; then
  echo "$VENV"
  exit 0
fi

echo "gabbi-venv: creating $VENV (${PINS[*]})" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}"
# The fixtures must import: fail here rather than in the first gabbit.
"$VENV/bin/python" -c 'import gabbi.driver, placement.tests.functional.fixtures.gabbits'
# Record the versions last, so an interrupted install is redone.
printf '%s\n' "$WANTED" >"$STAMP"
echo "$VENV"
