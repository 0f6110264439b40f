#!/usr/bin/env python3
"""How much of a runc exec is the seccomp filter compile?  runc path and api path,
N execs into a container with Docker's default seccomp profile vs seccomp=unconfined.
Also dumps a perf profile by comm for 60 runc execs (perf record -a), if perf exists."""
import os, sys, subprocess, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import Sampler, run_path, sh, IMAGE, RUNC_ROOT, remove_containers  # noqa

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
remove_containers()
try:
    res = {}
    for name, opts in [("default-seccomp", []), ("unconfined", ["--security-opt", "seccomp=unconfined"])]:
        cid = sh("docker", "run", "-d", "--label", "execcost=1", *opts, IMAGE, "sleep", "100000")
        s = Sampler([cid])
        for path in ["runc", "api"]:
            r = run_path(s, path, [cid], N, 1)
            res[(name, path)] = r
            print(f"{name:16s} {path:5s} total2={r['total2']:.2f} dockerd={r['dockerd']:.2f} "
                  f"containerd={r['containerd']:.2f} shim={r['shim']:.2f} runc+proc="
                  f"{r['shim-kids'] + r['client-kids']:.2f} in-ctr={r['in-ctr']:.2f} "
                  f"p50={r['p50']:.1f}", flush=True)
    if subprocess.run(["which", "perf"], stdout=subprocess.DEVNULL).returncode == 0:
        cid = sh("docker", "ps", "-q", "--no-trunc", "--filter", "label=execcost=1").split()[-1]
        sh("perf", "record", "-a", "-F", "1999", "-o", "/tmp/execcost.perf", "--", "sh", "-c",
           f"for i in $(seq 60); do runc --root {RUNC_ROOT} exec {cid} true; done")
        print(subprocess.run("perf report -i /tmp/execcost.perf --sort comm,dso --stdio 2>/dev/null"
                             " | grep -v '^#' | grep -v '^$' | head -16", shell=True,
                             stdout=subprocess.PIPE, text=True).stdout)
        os.unlink("/tmp/execcost.perf")
finally:
    remove_containers()
