#!/usr/bin/env bash
# `make hot-code`: profile the release agent under callgrind doing what a node does every day,
# and write the functions that ran to agent/hot-code/hot.ld (scripts/hot-code.py), the linker
# script that puts them together in the release binary (agent/hot-code/README.md says why).
#
# Two runs, HOT_CODE_SECONDS each (240) after the pods are up, on the real engine:
#  - standalone: ten static pods with a 1 s httpGet readiness probe (the bench's P4/P5 pod),
#    the read-only port, /healthz and the debug page read, one container killed, one manifest
#    removed and written again;
#  - API mode: the test API server over TLS, five pods with a ConfigMap volume and a readiness
#    probe created with kubectl, `kubectl logs` and `kubectl exec` through the kubelet API,
#    one pod deleted.
# Needs valgrind (Debian's package) and kubectl. Every container it made is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${HOT_CODE_SECONDS:-240}
command -v valgrind >/dev/null || apt-get install -y -q valgrind >/dev/null

# The agent as `make bench` builds it (with the bench: the features cargo unifies are the same),
# but in the linker's own order: valgrind finds no symbols in a section other than `.text`.
DOCKERLET_CODE_LAYOUT=off cargo build --release -p dockerlet -p dockerlet-bench
cargo build -p dockerlet-fake-apiserver --bin test-apiserver
make image >/dev/null

work=$(mktemp -d /tmp/dockerlet-hot-code.XXXXXX)
# The profiles stay (scripts/hot-code.py can write the list again from them).
profiles=target/hot-code
mkdir -p "$profiles"
cp target/release/dockerlet "$work/dockerlet"
nodes=(hot-code-standalone hot-code-api)
cleanup() {
    pkill -f "$work/dockerlet" 2>/dev/null || true
    pkill -f "test-apiserver --listen 127.0.0.1:26443" 2>/dev/null || true
    for node in "${nodes[@]}"; do
        ids=$( (docker ps -aq --filter "label=io.dockerlet.node=$node"
            docker ps -aq --filter "name=dockerlet_node_$node") | sort -u)
        [ -z "$ids" ] || docker rm -f $ids >/dev/null
        # The pod cgroups the agent made under its --cgroup-root.
        for root in /sys/fs/cgroup/*/"dockerlet-hot-code-${node#hot-code-}" /sys/fs/cgroup/"dockerlet-hot-code-${node#hot-code-}"; do
            [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
        done
    done
    # The API pods' token volumes are tmpfs mounts the stopped agent left.
    grep -F "$work" /proc/mounts | awk '{print $2}' | xargs -r -n1 umount -l
    rm -rf "$work"
}
trap cleanup EXIT

# The agent under callgrind: $1 the run's name, the rest its own flags.
agent() {
    local name=$1
    shift
    mkdir -p "$work/$name/root"
    valgrind --tool=callgrind --demangle=no --dump-instr=no \
        --callgrind-out-file="$profiles/callgrind.out.$name" \
        "$work/dockerlet" --hostname-override "hot-code-$name" --root-dir "$work/$name/root" \
        --pod-logs-dir "$work/$name/logs" --cgroup-root "/dockerlet-hot-code-$name" \
        --read-only-port 26255 --healthz-port 26248 --port 26250 --address "${ADDRESS:-127.0.0.1}" \
        --debug-address 127.0.0.1:26265 --image-gc-high-threshold 100 \
        --eviction-hard 'memory.available<100Mi,nodefs.available<1Mi,nodefs.inodesFree<1%,imagefs.available<1Mi,imagefs.inodesFree<1%' \
        "$@" >"$work/$name.log" 2>&1 &
    echo $!
}

# Wait until the read-only port lists $1 pods, all Running.
wait_running() {
    for _ in $(seq 1 120); do
        if curl -sf localhost:26255/pods | python3 -c "
import json, sys
items = json.load(sys.stdin)['items']
sys.exit(0 if len(items) == $1 and all(p['status'].get('phase') == 'Running' for p in items) else 1)" 2>/dev/null; then
            return 0
        fi
        sleep 2
    done
    echo "hot-code: pods not running; the agent's log is $work/$2.log" >&2
    tail -20 "$work/$2.log" >&2
    return 1
}

# The node's everyday reads, $1 times 10 s apart.
read_endpoints() {
    for _ in $(seq 1 "$1"); do
        for path in /pods /stats/summary /metrics /metrics/cadvisor /metrics/resource /metrics/probes; do
            curl -s -o /dev/null "localhost:26255$path"
        done
        curl -s -o /dev/null localhost:26248/healthz
        curl -s -o /dev/null localhost:26265/debug/
        curl -s -o /dev/null localhost:26265/debug/actors
        sleep 10
    done
}

# Stop the agent and wait for callgrind to write its profile (the agent was started in a
# subshell, so it is not this shell's child to `wait` for).
stop_agent() {
    kill -TERM "$1"
    while kill -0 "$1" 2>/dev/null; do sleep 1; done
}

pod_yaml() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: dockerlet.local/busybox:1
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "echo ok > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"]
      readinessProbe:
        httpGet:
          path: /index.html
          port: 8080
        periodSeconds: 1
EOF
}

echo "hot-code: standalone run (${SECONDS_EACH}s)"
mkdir -p "$work/manifests"
for i in $(seq 1 10); do pod_yaml "hot-$i" >"$work/manifests/hot-$i.yaml"; done
pid=$(agent standalone --pod-manifest-path "$work/manifests" --file-check-frequency 1s)
wait_running 10 standalone
read_endpoints 3
docker kill "$(docker ps -q --filter label=io.dockerlet.node=hot-code-standalone --filter name=hot-3 | head -1)" >/dev/null
mv "$work/manifests/hot-10.yaml" "$work/hot-10.yaml"
read_endpoints 3
mv "$work/hot-10.yaml" "$work/manifests/hot-10.yaml"
read_endpoints $((SECONDS_EACH / 10 - 6))
stop_agent "$pid"

echo "hot-code: API mode run (${SECONDS_EACH}s)"
target/debug/test-apiserver --listen 127.0.0.1:26443 --tls --kubeconfig-out "$work/kubeconfig" \
    >"$work/apiserver.log" 2>&1 &
for _ in $(seq 1 50); do [ -s "$work/kubeconfig" ] && break; sleep 0.2; done
kubectl="kubectl --kubeconfig $work/kubeconfig"
# The API server reaches the kubelet API at the node's address for logs and exec.
pid=$(ADDRESS=0.0.0.0 agent api --kubeconfig "$work/kubeconfig" \
    --client-ca-file "$work/kubelet-client-ca.crt")
$kubectl create configmap hot-config --from-literal=greeting=hello >/dev/null
for i in $(seq 1 5); do
    pod_yaml "hot-api-$i" | python3 -c "
import sys
text = sys.stdin.read().replace('spec:\n', 'spec:\n  nodeName: hot-code-api\n  volumes:\n    - name: config\n      configMap:\n        name: hot-config\n', 1)
print(text.replace('      readinessProbe:', '      volumeMounts:\n        - name: config\n          mountPath: /config\n      readinessProbe:', 1))
" | $kubectl apply -f - >/dev/null
done
$kubectl wait --for=condition=Ready pod --all --timeout=240s >/dev/null
$kubectl logs hot-api-1 >/dev/null || echo "hot-code: kubectl logs failed; its code is not in the profile" >&2
$kubectl exec hot-api-1 -- cat /config/greeting >/dev/null ||
    echo "hot-code: kubectl exec failed; its code is not in the profile" >&2
read_endpoints 3
$kubectl delete pod hot-api-5 --wait=true >/dev/null
read_endpoints $((SECONDS_EACH / 10 - 3))
stop_agent "$pid"

python3 scripts/hot-code.py dockerlet agent/hot-code/hot.ld \
    "$profiles/callgrind.out.standalone" "$profiles/callgrind.out.api"
echo "hot-code: the next release build links with the new list"
