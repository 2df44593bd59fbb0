#!/usr/bin/env bash
# Installs the Node packages some tests drive (pinned in hack/npm/package-lock.json):
# playwright-core, which drives Debian's Chromium (`apt-get install chromium`) headless
# for tests/capacity_page.rs (no browser is downloaded), and Grafana's dashboard types
# (@grafana/schema) with TypeScript, against which tests/chart_monitoring.rs checks the
# chart's dashboard. Idempotent: kept under ~/.cache/kubeplace, keyed on the lock file's
# digest. Needs node and npm with access to the npm registry.
#
#   hack/npm-deps.sh     # prints the node_modules directory
set -euo pipefail

here=$(cd "$(dirname "$0")/npm" && pwd)
key=$(sha256sum "$here/package-lock.json" | cut -c1-16)
dir=${KUBEPLACE_NPM_DEPS:-$HOME/.cache/kubeplace/npm-$key}
if [[ ! -f "$dir/.installed" ]]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$dir.tmp/"
  (cd "$dir.tmp" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts >&2)
  touch "$dir.tmp/.installed"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
echo "$dir/node_modules"
