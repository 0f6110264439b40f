#!/usr/bin/env python3
"""host-gw routing for scripts/test-vm-pair.sh's guests, as flannel's host-gw backend does it:
every other Node's pod CIDR (spec.podCIDR, allocated by the API server's node IPAM) is routed
through that Node's InternalIP, which is on the link both guests share.

Polls the Nodes every 2 s until killed, with a credential of its own (KUBECONFIG, the guest has
no PyYAML, so its two fields are read by pattern): as flannel's ServiceAccount, not the node's,
since the Node authorizer lets a node read only its own Node object.

Usage: hostgw.py NODE_NAME KUBECONFIG
"""

import json
import re
import subprocess
import sys
import time
import urllib.request


def credentials(kubeconfig):
    text = open(kubeconfig, encoding="utf-8").read()
    server = re.search(r"^\s*server:\s*(\S+)", text, re.M).group(1).strip("\"'")
    token = re.search(r"^\s*token:\s*(\S+)", text, re.M).group(1).strip("\"'")
    return server, token


def nodes(server, token):
    request = urllib.request.Request(
        server + "/api/v1/nodes", headers={"Authorization": "Bearer " + token}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["items"]


def wanted_routes(items, me):
    routes = {}
    for node in items:
        if node["metadata"]["name"] == me:
            continue
        cidr = node.get("spec", {}).get("podCIDR")
        addresses = node.get("status", {}).get("addresses", [])
        internal = [a["address"] for a in addresses if a.get("type") == "InternalIP"]
        if cidr and internal:
            routes[cidr] = internal[0]
    return routes


def main():
    me, kubeconfig = sys.argv[1], sys.argv[2]
    server, token = credentials(kubeconfig)
    routed = {}
    while True:
        try:
            for cidr, via in wanted_routes(nodes(server, token), me).items():
                if routed.get(cidr) != via:
                    subprocess.run(["ip", "route", "replace", cidr, "via", via], check=True)
                    routed[cidr] = via
                    print(f"route {cidr} via {via}", flush=True)
        except Exception as error:  # the API server may not answer yet; try again
            print(f"nodes: {error}", flush=True)
        time.sleep(2)


if __name__ == "__main__":
    main()
