#!/bin/bash
# The graceful node shutdown check of `make test-vm` (run by job.sh in the Debian 12 guest, last):
# start the agent as a systemd unit of its own with shutdownGracePeriod 10s (5s of them for
# critical pods) and two static pods whose preStop hooks write the time into the share, wait
# until both run, record logind's state, and start a poller that saves `/pods` every half
# second. job.sh then runs `systemctl poweroff`: logind announces PrepareForShutdown, the agent
# stops the pods and releases its inhibitor lock, and the guest powers off. The host checks what
# was written with scripts/vm/check-shutdown.py.
set -euo pipefail

dir=/share/out/shutdown
manifests=/tmp/shutdown-manifests
mkdir -p "$dir/marks" "$manifests"

# A container that ignores SIGTERM (each stop takes the whole grace period) and a preStop hook
# that writes "<pod> <uptime>" into the share.
pod() {
    local name=$1 class=$2
    cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $name
spec:
$class  terminationGracePeriodSeconds: 120
  volumes:
  - name: m
    hostPath: {path: $dir/marks, type: Directory}
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap '' TERM; sleep 3600 & wait; sleep 3600"]
    volumeMounts:
    - {name: m, mountPath: /m}
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo $name \$(cut -d' ' -f1 /proc/uptime) >> /m/prestop"]
YAML
}
pod ordinary "" >"$manifests/ordinary.yaml"
pod critical "  priorityClassName: system-node-critical
" >"$manifests/critical.yaml"

systemd-run --unit dockerlet-shutdown \
    -p StandardOutput="file:$dir/agent.log" -p StandardError="file:$dir/agent.log" \
    /usr/local/bin/dockerlet --pod-manifest-path "$manifests" --root-dir /var/lib/dockerlet-shutdown \
    --pod-logs-dir /var/log/pods-shutdown --hostname-override vm-shutdown \
    --read-only-port 10255 --healthz-port 0 --port 0 --debug-address 127.0.0.1:10265 \
    --shutdown-grace-period 10s --shutdown-grace-period-critical-pods 5s

running() {
    curl -sf http://127.0.0.1:10255/pods 2>/dev/null | python3 -c '
import json, sys
pods = json.load(sys.stdin)["items"]
running = [p for p in pods if p.get("status", {}).get("phase") == "Running"
           and all(c.get("ready") for c in p["status"].get("containerStatuses", []))]
sys.exit(0 if len(running) == 2 else 1)' 2>/dev/null
}
for _ in $(seq 120); do
    running && break
    sleep 1
done
running || { echo "shutdown check: the two pods did not run within 120 s"; exit 1; }

cp /etc/systemd/logind.conf.d/99-kubelet.conf "$dir/" 2>/dev/null || echo "no drop-in" >"$dir/99-kubelet.conf"
busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager \
    InhibitDelayMaxUSec >"$dir/inhibit-delay" 2>&1 || true
systemd-inhibit --list --no-pager >"$dir/inhibitors" 2>&1 || true

systemd-run --unit dockerlet-shutdown-poll /bin/sh -c "i=10000; while true; do
    curl -sf http://127.0.0.1:10255/pods >$dir/pods-\$i.json.tmp && mv $dir/pods-\$i.json.tmp $dir/pods-\$i.json
    i=\$((i + 1)); sleep 0.5; done"
echo "shutdown check: both pods run; the agent holds: $(grep -c kubelet "$dir/inhibitors" || true) kubelet inhibitor(s)"
