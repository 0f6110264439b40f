"""Port-forward through the official Python client (`kubernetes.stream.portforward`).

Run by real_clients.rs: `python port_forward.py <kubeconfig> <pod>`. The pod serves HTTP on
8080 (`/` is `hello-web`) and echoes on 8081. Both ports go through one forward (one WebSocket,
channels 0-1 for 8080 and 2-3 for 8081), then a port nobody listens on in a second one. Prints
one JSON object of what the client saw; the Rust test asserts on it.
"""

import json
import socket
import sys
import time

from kubernetes import client, config
from kubernetes.stream import portforward

config.load_kube_config(config_file=sys.argv[1])
api = client.CoreV1Api()
pod = sys.argv[2]
seen = {}


def read_until(sock, want, timeout=30):
    """Bytes from `sock` until `want` is among them, it closes (or is reset), or `timeout`
    passes."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while want not in got and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionError):
            break
        if not chunk:
            break
        got += chunk
    return got.decode("utf-8", "replace")


pf = portforward(api.connect_get_namespaced_pod_portforward, pod, "default", ports="8080,8081")
echo = pf.socket(8081)
echo.sendall(b"echo-me\n")
web = pf.socket(8080)
web.sendall(b"GET / HTTP/1.0\r\n\r\n")
seen["web"] = read_until(web, b"hello-web")
seen["echo"] = read_until(echo, b"echo-me\n")
chunk = "".join("%07d\n" % i for i in range(8000)).encode()
echo.sendall(chunk)
seen["echo_big_ok"] = read_until(echo, chunk[-8:]) == chunk.decode()
seen["errors"] = [pf.error(8080), pf.error(8081)]
pf.close()

# A port nobody listens on: the error channel says so and the socket is closed (kubelet
# dials the port when the forward starts, so the socket may be closed before we write).
pf = portforward(api.connect_get_namespaced_pod_portforward, pod, "default", ports="9999")
nobody = pf.socket(9999)
try:
    nobody.sendall(b"anyone?\n")
except OSError:
    pass
seen["nobody_data"] = read_until(nobody, b"\0", timeout=30)
deadline = time.monotonic() + 30
while pf.error(9999) is None and time.monotonic() < deadline:
    time.sleep(0.1)
seen["nobody_error"] = pf.error(9999)
pf.close()

print(json.dumps(seen))
