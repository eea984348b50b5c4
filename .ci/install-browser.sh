#!/usr/bin/env bash
# Installs what the browser tests (cmd/waymark/e2e_browser*_test.go,
# e2e_dashboard_test.go, rollup/api/dashboard) need:
# Debian's chromium at /usr/bin/chromium, and npm, with which the tests
# fetch Plausible's official tracker. Idempotent: does nothing when both
# are there already. Needs root (CI containers run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -eq 0 ]; then
  echo "install-browser: chromium and npm already installed"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  $sudo apt-get install -y -q "${need[@]}"
fi
/usr/bin/chromium --version
npm --version
