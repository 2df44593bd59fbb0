#!/usr/bin/env bash
# Creates the virtualenv with Nova that tests/placement_nova.rs drives
# `kubeplace placement serve` with: hack/nova-report-client.py runs Nova's own
# Placement client (nova.scheduler.client.report.SchedulerReportClient) from
# it. Idempotent: the venv is kept under ~/.cache/kubeplace and rebuilt only
# when the pinned version below changes (it is recorded in the venv). Needs
# python3 (3.10 or later) with venv and access to PyPI; on a busy 2-core
# machine Nova and its dependencies took 13 minutes to install with an empty pip
# cache and 2.5 minutes with pip's cache filled.
#
#   hack/nova-venv.sh            # prints the venv's path
#   KUBEPLACE_NOVA_VENV=DIR hack/nova-venv.sh
set -euo pipefail

exec "$(dirname "$0")/pinned-venv.sh" nova-venv \
  "${KUBEPLACE_NOVA_VENV:-$HOME/.cache/kubeplace/nova-venv}" bin/python \
  "nova==34.0.0"
