#!/bin/bash
# The job scripts/test-vm-pair.sh gives each of its two Debian 12 guests (run by
# dockerlet-vm-job.service from the share once docker.service is up): one node of a two-node
# cluster whose API server is the test API server on the host.
#
# 1. The guest's two links: qemu's user network (the host, so the API server, at 10.0.2.2) and
#    the socket link between the two guests (an L2 segment over the host's loopback), where
#    this node's address is LINK_IP, its Node's InternalIP (`--node-ip`).
# 2. Debian's CNI plugins from the share in /opt/cni/bin, and a bridge + host-local + firewall
#    + portmap template naming {{.PodCIDR}}: the agent renders it once the API server has
#    given the Node its pod CIDR.
# 3. host-gw routing as flannel's host-gw backend does it: hostgw.py watches the Nodes and routes
#    each other node's pod CIDR through that node's InternalIP; FORWARD accepts the cluster CIDR
#    (Docker's FORWARD policy is DROP).
# 4. The agent, until the host writes /share/done; then it is stopped, and nothing of the pod
#    network may be left (no veth, no IP lease, no iptables rule naming a pod address).
#
# /share/node.env gives NODE, LINK_IP, LINK_MAC, USER_MAC and CLUSTER_CIDR. Output in
# /share/out/: job.log (this script), agent.log, hostgw.log.
set -euo pipefail
# shellcheck source=/dev/null
. /share/node.env
out=/share/out

echo "== guest $NODE: $(uname -r), $(grep -m1 "^PRETTY_NAME=" /etc/os-release | cut -d= -f2)"

# The interface with MAC address $1.
iface_with_mac() {
    ip -o link | awk -v mac="$1" 'index($0, "link/ether " mac) { sub(":$", "", $2); print $2 }'
}

user=$(iface_with_mac "$USER_MAC")
link=$(iface_with_mac "$LINK_MAC")
[ -n "$user" ] && [ -n "$link" ] || {
    ip -o link
    echo "no interface with MAC $USER_MAC (user network) or $LINK_MAC (link)"
    exit 1
}
# qemu's user network: the guest is 10.0.2.15 and the host 10.0.2.2 (no DHCP client in the image).
ip link set "$user" up
ip addr add 10.0.2.15/24 dev "$user"
ip route add default via 10.0.2.2
ip link set "$link" up
ip addr add "$LINK_IP/24" dev "$link"
echo "== links: $user (user network), $link $LINK_IP (to the other guest)"

docker load -i /share/busybox.tar
install -m 755 /share/dockerlet /usr/local/bin/dockerlet
mkdir -p /opt/cni/bin /etc/cni/net.d /etc/dockerlet
install -m 755 /share/cni/* /opt/cni/bin/

iptables -I FORWARD 1 -s "$CLUSTER_CIDR" -j ACCEPT
iptables -I FORWARD 1 -d "$CLUSTER_CIDR" -j ACCEPT

cat >/etc/dockerlet/cni-template.conflist <<'JSON'
{
  "cniVersion": "1.0.0",
  "name": "pair",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "firewall"},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

echo "== agent $NODE"
dockerlet --kubeconfig /share/kubeconfig --hostname-override "$NODE" --node-ip "$LINK_IP" \
    --cgroup-driver systemd --root-dir /var/lib/dockerlet \
    --network-plugin cni --cni-bin-dir /opt/cni/bin \
    --cni-conf-template /etc/dockerlet/cni-template.conflist \
    >"$out/agent.log" 2>&1 &
agent=$!
python3 /share/hostgw.py "$NODE" /share/hostgw-kubeconfig >"$out/hostgw.log" 2>&1 &
hostgw=$!

echo "== waiting for the host's /share/done"
rc=0
for _ in $(seq 900); do
    [ -e /share/done ] && break
    if ! kill -0 "$agent" 2>/dev/null; then
        echo "the agent exited early"
        rc=1
        break
    fi
    sleep 1
done
[ -e /share/done ] || { echo "no /share/done after 900 s"; rc=1; }

kill "$hostgw" 2>/dev/null || true
kill -TERM "$agent" 2>/dev/null || true
wait "$agent" || true
echo "== routes"
ip route

# What the pods' network would leave behind: the host ends of their veths, host-local's leases
# (one file per address in /var/lib/cni/networks/pair), and iptables rules naming an address of
# this node's pod CIDR (the bridge plugin's, firewall's, portmap's). The bridge itself stays, as
# with kubelet.
echo "== left of the pod network"
left=0
veths=$(ip -o link show type veth | awk '{ print $2 }')
[ -z "$veths" ] || { echo "veths: $veths"; left=1; }
leases=$(find /var/lib/cni/networks/pair -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null || true)
[ -z "$leases" ] || { echo "IP leases: $leases"; left=1; }
cidr=$(sed -n 's/.*"subnet": *"\([0-9.]*\)\.0\/24".*/\1./p' /etc/cni/net.d/*.conflist 2>/dev/null | head -n 1)
if [ -n "$cidr" ]; then
    rules=$(iptables-save | grep -F -- "$cidr" | grep -v -- "-A FORWARD" || true)
    [ -z "$rules" ] || { echo "iptables rules: $rules"; left=1; }
else
    echo "no rendered CNI configuration in /etc/cni/net.d"
    left=1
fi
[ "$left" = 0 ] && echo "nothing left"
[ "$left" = 0 ] || rc=1
echo "job: exit $rc"
exit "$rc"
