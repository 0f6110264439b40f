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
rc=0
host_compat --test-threads=2 "${args[@]}" || rc=$?

# Last, graceful node shutdown: the power-off that ends the VM is the test (shutdown.sh,
# checked on the host by scripts/vm/check-shutdown.py). The result goes to the share before
# the power-off, since this job is stopped with the rest of the guest.
echo "== graceful node shutdown: systemctl poweroff while the agent holds a logind inhibitor"
bash /share/shutdown.sh || rc=$?
echo "job: exit $rc; powering off through logind"
journalctl -b --no-pager >/share/out/journal.log 2>&1 || true
echo "$rc" >/share/out/exit-code.tmp
mv /share/out/exit-code.tmp /share/out/exit-code
cut -d' ' -f1 /proc/uptime >/share/out/shutdown/poweroff-at 2>/dev/null || true
sync
# Through logind (not --force, not the unit's SuccessAction): delay inhibitors are honoured.
systemctl poweroff
sleep 600
