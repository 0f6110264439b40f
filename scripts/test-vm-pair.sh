#!/usr/bin/env bash
# `make test-vm-pair` (part of `make test`): pods on two dockerlet nodes reach each other by pod
# IP across hosts. Two Debian 12 guests (the image of scripts/test-vm.sh) under qemu with TCG,
# each with its own Docker engine and agent, joined by a qemu socket network (UDP datagrams over
# the host's loopback: one L2 segment between the two guests). Both agents join one test API
# server on this host (fake-apiserver's test-apiserver, reached through qemu's user network at
# 10.0.2.2), which allocates each Node a pod CIDR from --cluster-cidr as kube-controller-
# manager's node IPAM does. Each guest (scripts/vm/pair-job.sh) renders its CNI configuration
# from a template naming {{.PodCIDR}} (Debian's bridge, host-local, firewall and portmap
# plugins), and routes the other node's pod CIDR through the other guest (scripts/vm/hostgw.py,
# host-gw style as flannel's backend).
#
# The check, through kubectl: each Node got its own pod CIDR; a web pod on vm-a and a client pod
# on vm-b got addresses from their own node's CIDR; the client fetches, by the web pod's IP, a
# CGI page that answers with the caller's address, and succeeds only if that is its own pod IP
# (routed, not masqueraded); once both pods are deleted, each guest finds no veth, IP lease or
# iptables rule of the pods left.
#
# Environment: VM_TIMEOUT (seconds for the whole run once booted, default 1200), VM_MEMORY
# (default 2G per guest), DOCKERLET_BIN (the agent; default: cargo builds target/debug), CARGO.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

VM_DIR=$ROOT/target/vm
PAIR_DIR=$VM_DIR/pair
VM_TIMEOUT=${VM_TIMEOUT:-1200}
export VM_MEMORY=${VM_MEMORY:-2G}
CARGO=${CARGO:-cargo}
IMAGE=${BUSYBOX_IMAGE:-dockerlet.local/busybox:1}
CLUSTER_CIDR=10.234.0.0/16
LOG_PREFIX=test-vm-pair
NODES=(vm-a vm-b)
declare -A LINK_IP=([vm-a]=192.168.77.1 [vm-b]=192.168.77.2)
declare -A LINK_MAC=([vm-a]=52:54:00:77:00:01 [vm-b]=52:54:00:77:00:02)
declare -A USER_MAC=([vm-a]=52:54:00:12:00:01 [vm-b]=52:54:00:12:00:02)
declare -A QEMU_PIDS=()
APISERVER_PID=
DEADLINE=

# shellcheck source=scripts/vm/lib.sh
. scripts/vm/lib.sh

# A TCP or UDP port nobody listens on now.
free_port() {
    python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"
}

cleanup() {
    local pid
    for pid in "${QEMU_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    [ -z "$APISERVER_PID" ] || kill "$APISERVER_PID" 2>/dev/null || true
    wait 2>/dev/null || true
}

kube() {
    kubectl --kubeconfig "$PAIR_DIR/kubeconfig" "$@"
}

# The binaries: the agent and the test API server (one cargo build, as `make test`'s).
build() {
    "$CARGO" build --workspace --bins
    AGENT=${DOCKERLET_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/dockerlet}
    APISERVER=${CARGO_TARGET_DIR:-$ROOT/target}/debug/test-apiserver
    [ -x "$AGENT" ] || die "no agent binary at $AGENT"
    [ -x "$APISERVER" ] || die "no test-apiserver binary at $APISERVER"
}

# The test API server on the host's loopback; guests reach it as 10.0.2.2 through qemu's user
# network (plain HTTP: its certificate names only 127.0.0.1 and localhost).
start_apiserver() {
    local port
    port=$(free_port tcp)
    "$APISERVER" --listen "127.0.0.1:$port" --kubeconfig-out "$PAIR_DIR/kubeconfig" \
        --cluster-cidr "$CLUSTER_CIDR" --node-authorization \
        --node-kubeconfig vm-a --node-kubeconfig vm-b >"$PAIR_DIR/apiserver.log" 2>&1 &
    APISERVER_PID=$!
    for _ in $(seq 50); do
        [ -f "$PAIR_DIR/kubeconfig-node-vm-b" ] && kube get --raw /readyz >/dev/null 2>&1 && break
        sleep 0.2
    done
    kube get --raw /readyz >/dev/null || die "the test API server did not start; log: $PAIR_DIR/apiserver.log"
    API_PORT=$port
    log "test API server on 127.0.0.1:$port, cluster CIDR $CLUSTER_CIDR"
}

# Kubeconfig $1 as a guest reaches the server, into $2.
guest_kubeconfig() {
    sed "s#http://127.0.0.1:$API_PORT#http://10.0.2.2:$API_PORT#" "$1" >"$2"
    grep -q "10.0.2.2:$API_PORT" "$2" || die "$1 does not name http://127.0.0.1:$API_PORT"
}

# Node $1's share: the agent, Debian's CNI plugins, the test image, its node credential with the
# server as the guest sees it, the job and its settings.
prepare_share() {
    local node=$1 share=$PAIR_DIR/$1/share plugin
    mkdir -p "$share/cni" "$share/out"
    cp "$AGENT" "$share/dockerlet"
    for plugin in bridge host-local firewall portmap loopback; do
        cp "/usr/lib/cni/$plugin" "$share/cni/" || die "no /usr/lib/cni/$plugin: scripts/ensure-test-tools.sh installs containernetworking-plugins"
    done
    # The node's credential for the agent; the cluster admin's for hostgw.py (flannel's
    # ServiceAccount would do: the Node authorizer lets a node read only its own Node).
    guest_kubeconfig "$PAIR_DIR/kubeconfig-node-$node" "$share/kubeconfig"
    guest_kubeconfig "$PAIR_DIR/kubeconfig" "$share/hostgw-kubeconfig"
    cp "$PAIR_DIR/busybox.tar" "$share/busybox.tar"
    cp scripts/vm/pair-job.sh "$share/job.sh"
    cp scripts/vm/hostgw.py "$share/hostgw.py"
    cat >"$share/node.env" <<ENV
NODE=$node
LINK_IP=${LINK_IP[$node]}
LINK_MAC=${LINK_MAC[$node]}
USER_MAC=${USER_MAC[$node]}
CLUSTER_CIDR=$CLUSTER_CIDR
ENV
}

# Both guests: qemu's user network, and a socket link to each other (each sends its frames to
# the other's UDP port on the loopback).
boot_pair() {
    local image=$1 port_a port_b node local_port peer_port
    port_a=$(free_port udp)
    port_b=$(free_port udp)
    for node in "${NODES[@]}"; do
        if [ "$node" = vm-a ]; then local_port=$port_a peer_port=$port_b; else local_port=$port_b peer_port=$port_a; fi
        start_qemu "$PAIR_DIR/$node" "$image" \
            -netdev user,id=user -device "virtio-net-pci,netdev=user,mac=${USER_MAC[$node]}" \
            -netdev "socket,id=link,udp=127.0.0.1:$peer_port,localaddr=127.0.0.1:$local_port" \
            -device "virtio-net-pci,netdev=link,mac=${LINK_MAC[$node]}"
        QEMU_PIDS[$node]=$QEMU_PID
        log "booting $node (TCG; console: $PAIR_DIR/$node/console.log)"
    done
}

# Whether a guest that stops is a failure (until the host lets them finish).
GUESTS_RUN=yes

# Wait up to $2 seconds for the command after it to succeed; $1 says what for.
wait_for() {
    local what=$1 seconds=$2 started=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - started)) -lt "$seconds" ] || die "no $what after ${seconds}s"
        [ "$SECONDS" -lt "$DEADLINE" ] || die "no $what before VM_TIMEOUT (${VM_TIMEOUT}s)"
        local node
        for node in "${NODES[@]}"; do
            [ "$GUESTS_RUN" = no ] || kill -0 "${QEMU_PIDS[$node]}" 2>/dev/null ||
                die "$node stopped while waiting for $what; console: $PAIR_DIR/$node/console.log"
        done
        sleep 2
    done
}

node_ready() {
    [ "$(kube get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

guests_off() {
    local node
    for node in "${NODES[@]}"; do
        ! kill -0 "${QEMU_PIDS[$node]}" 2>/dev/null || return 1
    done
}

nodes_ready() {
    node_ready vm-a && node_ready vm-b
}

no_pods() {
    [ -z "$(kube get pods -o name)" ]
}

pod_ready() {
    [ "$(kube get pod "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

pod_finished() {
    case $(kube get pod "$1" -o 'jsonpath={.status.phase}') in
    Succeeded | Failed) return 0 ;;
    *) return 1 ;;
    esac
}

# True when address $1 is in the /24 $2 (the API server hands out /24s).
in_cidr() {
    [ "${1%.*}" = "${2%.*/24}" ] && [[ $2 == */24 ]]
}

check() {
    local cidr_a cidr_b web_ip client_ip phase
    wait_for "Ready node vm-a and vm-b" 900 nodes_ready
    cidr_a=$(kube get node vm-a -o 'jsonpath={.spec.podCIDR}')
    cidr_b=$(kube get node vm-b -o 'jsonpath={.spec.podCIDR}')
    log "pod CIDRs from the API server: vm-a $cidr_a, vm-b $cidr_b"
    [ -n "$cidr_a" ] && [ -n "$cidr_b" ] && [ "$cidr_a" != "$cidr_b" ] || die "the nodes have no pod CIDRs of their own"

    kube create -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  nodeName: vm-a
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command:
    - sh
    - -c
    - |
      mkdir -p /www/cgi-bin
      printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n%%s\\n" "$REMOTE_ADDR"\n' >/www/cgi-bin/ip
      chmod +x /www/cgi-bin/ip
      exec httpd -f -p 8080 -h /www
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
YAML
    wait_for "Ready web pod on vm-a" 300 pod_ready web
    web_ip=$(kube get pod web -o 'jsonpath={.status.podIP}')
    log "web on vm-a at $web_ip"
    in_cidr "$web_ip" "$cidr_a" || die "the web pod's IP $web_ip is not in vm-a's pod CIDR $cidr_a"

    kube create -f - <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: client
  namespace: default
spec:
  nodeName: vm-b
  restartPolicy: Never
  containers:
  - name: client
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    env:
    - name: WEB_IP
      value: "$web_ip"
    - name: MY_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    command:
    - sh
    - -c
    - |
      for i in \$(seq 60); do
        got=\$(printf 'GET /cgi-bin/ip HTTP/1.0\r\n\r\n' | nc -w 3 "\$WEB_IP" 8080 | tail -n 1)
        case "\$got" in *"\$MY_IP]"|"\$MY_IP") echo "web at \$WEB_IP saw the caller as \$got"; exit 0 ;; esac
        echo "try \$i: web at \$WEB_IP answered '\$got', not \$MY_IP"
        sleep 2
      done
      exit 1
YAML
    wait_for "finished client pod on vm-b" 300 pod_finished client
    phase=$(kube get pod client -o 'jsonpath={.status.phase}')
    client_ip=$(kube get pod client -o 'jsonpath={.status.podIP}')
    kube get pods -o wide || true
    log "client on vm-b at $client_ip: $phase"
    in_cidr "$client_ip" "$cidr_b" || die "the client pod's IP $client_ip is not in vm-b's pod CIDR $cidr_b"
    [ "$phase" = Succeeded ] || die "the client on vm-b did not reach the web pod on vm-a by its pod IP ($phase; its output is in the agent log, $PAIR_DIR/vm-b/share/out/)"
    log "vm-b's pod reached vm-a's pod at $web_ip and was seen as $client_ip"

    kube delete pod web client --wait=true --timeout=120s
    wait_for "pods gone" 120 no_pods
}

# Tell both guests to finish, wait for them, and show their results.
finish() {
    local node code failed=0
    for node in "${NODES[@]}"; do
        touch "$PAIR_DIR/$node/share/done"
    done
    GUESTS_RUN=no
    wait_for "both guests powered off" 300 guests_off
    for node in "${NODES[@]}"; do
        echo "---- $node's job ($PAIR_DIR/$node/share/out/job.log)"
        cat "$PAIR_DIR/$node/share/out/job.log" 2>/dev/null || true
        code=$(cat "$PAIR_DIR/$node/share/out/exit-code" 2>/dev/null || echo none)
        [ "$code" = 0 ] || {
            log "$node's job ended with $code; agent log: $PAIR_DIR/$node/share/out/agent.log"
            failed=1
        }
    done
    [ "$failed" = 0 ] || die "a guest's job failed"
}

main() {
    trap cleanup EXIT
    local key image started
    started=$SECONDS
    check_requirements no
    command -v kubectl >/dev/null || die "no kubectl"
    mkdir -p "$VM_DIR"
    key=$(image_key)
    image=$VM_DIR/image-$key
    ensure_image "$image"
    exec 9>"$VM_DIR/pair.lock"
    flock 9
    rm -rf "$PAIR_DIR"
    mkdir -p "$PAIR_DIR"
    build
    scripts/build-busybox-image.sh
    docker save -o "$PAIR_DIR/busybox.tar" "$IMAGE"
    start_apiserver
    local node
    for node in "${NODES[@]}"; do
        prepare_share "$node"
    done
    rm -f "$PAIR_DIR/busybox.tar"
    boot_pair "$image"
    # The whole run is bounded: every wait ends at this deadline.
    DEADLINE=$((SECONDS + VM_TIMEOUT))
    check
    finish
    log "passed in $((SECONDS - started)) s; logs in $PAIR_DIR"
}

main "$@"
