#!/usr/bin/env bash
# Install the Debian packages the integration tests drive, when one is missing (idempotent):
# prometheus (promtool checks /metrics), chromium (headless, renders the debug page),
# docker-registry and apache2-utils (htpasswd: the private registry of the pull tests),
# python3-venv (the official Python client's virtualenv of real_clients.rs),
# containernetworking-plugins and iptables (the CNI plugins of cni_network.rs); for
# `make test-vm` (scripts/test-vm.sh), qemu, qemu-img, debootstrap and mkfs.ext4 -d.
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# The packages whose command is missing.
find_missing() {
    missing=()
    command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
    command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
    command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
    command -v qemu-img >/dev/null 2>&1 || missing+=(qemu-utils)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
    [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
    command -v iptables-save >/dev/null 2>&1 || missing+=(iptables)
}

find_missing
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
echo "ensure-test-tools: installing ${missing[*]}" >&2
as_root apt-get update -q
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "${missing[@]}"

# Installing qemu-system-x86 removes a newer qemu-utils from backports that does not fit it
# (qemu-img then goes missing): one more pass installs the matching one.
find_missing
if [ "${#missing[@]}" -gt 0 ]; then
    echo "ensure-test-tools: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "${missing[@]}"
fi
