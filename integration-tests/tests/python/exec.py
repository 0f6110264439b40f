"""Exec and attach through the official Python client (`kubernetes.stream.stream`).

Run by real_clients.rs: `python exec.py <kubeconfig> <pod>`. Prints one JSON object of what the
client saw; the Rust test asserts on it. The pod has a container `app` (sleeps) and `reader`
(stdin: true, echoes each line it reads as `got:<line>`).
"""

import json
import sys

from kubernetes import client, config
from kubernetes.stream import stream
from kubernetes.stream.ws_client import RESIZE_CHANNEL

config.load_kube_config(config_file=sys.argv[1])
api = client.CoreV1Api()
pod = sys.argv[2]
seen = {}

# Everything at once (`_preload_content` left True): stdout and stderr in one string.
seen["preloaded"] = stream(
    api.connect_get_namespaced_pod_exec, pod, "default", container="app",
    command=["sh", "-c", "echo out-line; echo err-line >&2"],
    stderr=True, stdin=False, stdout=True, tty=False,
)

# A session: stdin written, stdout and stderr apart, the exit code from the error channel.
resp = stream(
    api.connect_get_namespaced_pod_exec, pod, "default", container="app",
    command=["sh", "-c", "read a; echo got:$a; echo err:$a >&2; exit 7"],
    stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False,
)
seen["subprotocol"] = resp.subprotocol
resp.write_stdin("ping\n")
resp.run_forever(timeout=60)
seen["session"] = {
    "stdout": resp.read_stdout(),
    "stderr": resp.read_stderr(),
    "open": resp.is_open(),
    "returncode": resp.returncode,
}

# The end of stdin (v5's close of channel 0) ends `cat`, which then exits 0.
resp = stream(
    api.connect_get_namespaced_pod_exec, pod, "default", container="app",
    command=["cat"], stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False,
)
resp.write_stdin("first\nsecond\n")
resp.close_channel(0)
resp.run_forever(timeout=60)
seen["cat"] = {"stdout": resp.read_stdout(), "open": resp.is_open(), "returncode": resp.returncode}

# A terminal: the size written on the resize channel reaches the command.
resp = stream(
    api.connect_get_namespaced_pod_exec, pod, "default", container="app",
    command=["sh", "-c", "sleep 1; stty size; tty"],
    stderr=False, stdin=True, stdout=True, tty=True, _preload_content=False,
)
resp.write_channel(RESIZE_CHANNEL, json.dumps({"Width": 100, "Height": 30}))
resp.run_forever(timeout=60)
seen["tty"] = {"stdout": resp.read_stdout(), "returncode": resp.returncode}

# Attach to a container reading its stdin.
resp = stream(
    api.connect_get_namespaced_pod_attach, pod, "default", container="reader",
    stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False,
)
resp.write_stdin("hello-attach\n")
seen["attach"] = resp.readline_stdout(timeout=30)
resp.close()

print(json.dumps(seen))
