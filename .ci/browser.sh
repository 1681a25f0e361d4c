#!/usr/bin/env bash
# The headless browser of the report check (issue 52.3; tests/workflow/test_end_to_end.py opens
# results/<run>/report.html and results/<run>/index.html in it at 1280 px): Debian's chromium from the
# package registry, installed when no Chromium is on PATH; prints the version found. Without it
# the check skips, so .ci/run runs this before `make test`.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
"$(command -v chromium || command -v chromium-browser)" --headless --version 2>/dev/null
