"""Container logs through the official Python client (`read_namespaced_pod_log`).

Run by real_clients.rs: `python logs.py <kubeconfig> <pod>`. The pod's container `ticker`
wrote `old-1`..`old-3` at its start, waited, and now writes `tick-<n>` every second. Prints one
JSON object of what the client saw; the Rust test asserts on it.
"""

import json
import sys
import time

from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

config.load_kube_config(config_file=sys.argv[1])
api = client.CoreV1Api()
pod = sys.argv[2]
seen = {}

seen["all"] = api.read_namespaced_pod_log(pod, "default", container="ticker")
seen["tail_lines_2"] = api.read_namespaced_pod_log(pod, "default", container="ticker", tail_lines=2)
seen["timestamps"] = api.read_namespaced_pod_log(
    pod, "default", container="ticker", timestamps=True, tail_lines=3)
seen["since_seconds_2"] = api.read_namespaced_pod_log(
    pod, "default", container="ticker", since_seconds=2)

# Follow: lines as the container writes them, read as the client's own watch reads them
# (chunk by chunk off the response, split at newlines), each with the time it arrived.
resp = api.read_namespaced_pod_log(
    pod, "default", container="ticker", follow=True, tail_lines=1, _preload_content=False)
started = time.monotonic()
followed = []
for line in iter_resp_lines(resp):
    followed.append({"line": line, "at": time.monotonic() - started})
    if len(followed) == 4:
        break
resp.release_conn()
seen["followed"] = followed

print(json.dumps(seen))
