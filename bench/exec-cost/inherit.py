#!/usr/bin/env python3
"""Which attributes of the *caller* leak into a `runc exec` process (path b)?

Runs the profile probe via runc twice in the P1-style container: once from a plain
caller, once from a caller with modified rlimits (NOFILE, CORE, MEMLOCK, SIGPENDING),
nice 5, umask 077, oom_score_adj 100, CPU affinity {0}, an extra inherited fd 5 and
an extra env var.  Everything that changes between the two runs is taken from the caller,
not from the bundle spec -- i.e. with path b it would be dockerlet's own value, whereas
with path a it is the shim's (inherited from containerd/dockerd).
"""
import difflib
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import RUNC_ROOT, IMAGE, sh  # noqa
from profile import CMD  # noqa

OUT = os.path.dirname(os.path.abspath(__file__))


def weird_caller():
    resource.setrlimit(resource.RLIMIT_NOFILE, (777, 888))
    resource.setrlimit(resource.RLIMIT_CORE, (12345, 12345))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536))
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (4321, 4321))
    os.nice(5)
    os.umask(0o077)
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("100")
    os.sched_setaffinity(0, {0})


def run(cid, weird):
    env = dict(os.environ, LEAKED_ENV="1")
    r, w = os.pipe()
    os.dup2(r, 5)
    p = subprocess.run(["runc", "--root", RUNC_ROOT, "exec", cid] + CMD,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env,
                       preexec_fn=weird_caller if weird else None,
                       pass_fds=(5,) if weird else ())
    os.close(5), os.close(r), os.close(w)
    return p.returncode, p.stdout, p.stderr


def main():
    cid = sh("docker", "run", "-d", "--label", "execcost=1", "--user", "1234:5678",
             "--group-add", "4242", "--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE",
             "--security-opt", "no-new-privileges", "--memory", "64m", IMAGE,
             "sleep", "100000")
    try:
        rc1, a, e1 = run(cid, False)
        rc2, b, e2 = run(cid, True)
        d = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "runc_plain_caller",
                                      "runc_modified_caller", n=0, lineterm=""))
        txt = f"rc={rc1},{rc2} stderr={e1!r},{e2!r}\n" + "\n".join(d)
        with open(os.path.join(OUT, "inherit_diff.txt"), "w") as f:
            f.write(txt + "\n")
        print(txt)
    finally:
        sh("docker", "rm", "-f", cid)


if __name__ == "__main__":
    main()
