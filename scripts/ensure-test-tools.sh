#!/usr/bin/env bash
# Install the Debian packages the integration tests drive, when one is missing (idempotent):
# prometheus (promtool checks /metrics), chromium (headless, renders the debug page),
# docker-registry and apache2-utils (htpasswd: the private registry of the pull tests),
# python3-venv (the official Python client's virtualenv of real_clients.rs).
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
echo "ensure-test-tools: installing ${missing[*]}" >&2
as_root apt-get update -q

DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "${missing[@]}"
