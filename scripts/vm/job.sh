#!/bin/bash
# The job scripts/test-vm.sh gives the Debian 12 guest (run by dockerlet-vm-job.service from
# the share, once docker.service is up): load the test image, then run the host_compat test
# binary against the agent binary, both copied from the share. Its output and exit code go
# back to the host through the share.
set -euo pipefail

echo "== guest: $(uname -r), $(grep -m1 "^PRETTY_NAME=" /etc/os-release | cut -d= -f2)"
docker info --format 'docker {{.ServerVersion}}: cgroup driver {{.CgroupDriver}}, cgroup v{{.CgroupVersion}}, storage {{.Driver}}'

echo "== docker load"
docker load -i /share/busybox.tar

# Run from the guest's disk, not the 9p share (no exec or mmap surprises from 9p).
install -m 755 /share/dockerlet /usr/local/bin/dockerlet
install -m 755 /share/host_compat /usr/local/bin/host_compat

# The harness finds the agent through DOCKERLET_BIN (integration-tests/src/harness.rs
# try_binary); DOCKERLET_HOST_COMPAT=1 tells the tests they are on the host they stand for.
export DOCKERLET_BIN=/usr/local/bin/dockerlet DOCKERLET_HOST_COMPAT=1 RUST_BACKTRACE=1
args=()
if [ -s /share/test-args ]; then
    read -ra args </share/test-args
fi
echo "== host_compat ${args[*]}"
cd /tmp
host_compat --test-threads=2 "${args[@]}"
