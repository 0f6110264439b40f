#!/usr/bin/env python3
"""Security-profile equality: run one probe script through every exec path and diff
against path a (Docker Engine API).  stdlib only.  Writes profile_<container>_<path>.txt
and prints a unified diff per path.

Containers:
  P1  --user 1234:5678 --group-add 4242 --cap-drop ALL --cap-add NET_BIND_SERVICE
      --security-opt no-new-privileges --memory 64m            (seccomp default)
  P2  P1 + -e PROBE_ENV=x -w /tmp --ulimit nofile=1024:2048 --ulimit nproc=500
      --oom-score-adj 321 --hostname probe2
  P3  a plain container started with -t (tty) to see what runc exec does with
      process.terminal=true in the bundle spec
"""
import difflib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import UnixHTTP, api_exec, RUNC_ROOT, CTRD_SOCK, IMAGE, sh  # noqa

OUT = os.path.dirname(os.path.abspath(__file__))

PROBE = r'''
echo "== id"; id
echo "== status"; grep -E '^(PPid|Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|Cpus_allowed_list|NSpid|NStgid)' /proc/self/status
echo "== apparmor"; cat /proc/self/attr/current 2>&1
echo "== cgroup"; cat /proc/self/cgroup
echo "== ns"; for n in /proc/self/ns/*; do echo "$(basename $n) $(readlink $n)"; done
echo "== env"; env | sort
echo "== cwd"; pwd
echo "== limits"; cat /proc/self/limits
echo "== oom_score_adj"; cat /proc/self/oom_score_adj
echo "== umask"; umask
echo "== nice"; cut -d' ' -f19 /proc/self/stat
echo "== fds"; for f in /proc/self/fd/*; do echo "$(basename $f) $(readlink $f | sed -E 's/[0-9]+/N/g')"; done
echo "== hostname"; hostname
echo "== loginuid"; cat /proc/self/loginuid 2>&1
echo "== stat"; cut -d' ' -f4- /proc/$$/stat | cut -d' ' -f1 | sed 's/^/ppid_of_shell=/'
'''

CMD = ["sh", "-c", PROBE]


def run_api(cid):
    conn = UnixHTTP()
    rc, so, se = api_exec(conn, cid, CMD)
    return rc, so.decode(), se.decode()


def run_sub(argv):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def run_cli(cid):
    return run_sub(["docker", "exec", cid] + CMD)


def run_runc(cid, extra=()):
    return run_sub(["runc", "--root", RUNC_ROOT, "exec", *extra, cid] + CMD)


def run_ctr(cid):
    return run_sub(["ctr", "-a", CTRD_SOCK, "-n", "moby", "task", "exec", "--exec-id",
                    f"profile-{os.getpid()}", cid] + CMD)


def main():
    sh("sh", "-c", "ids=$(docker ps -aq --filter label=execcost=1); "
       "[ -z \"$ids\" ] || docker rm -f $ids >/dev/null")
    base = ["--user", "1234:5678", "--group-add", "4242", "--cap-drop", "ALL",
            "--cap-add", "NET_BIND_SERVICE", "--security-opt", "no-new-privileges",
            "--memory", "64m"]
    ctrs = {
        "P1": base,
        "P2": base + ["-e", "PROBE_ENV=x", "-w", "/tmp", "--ulimit", "nofile=1024:2048",
                      "--ulimit", "nproc=500", "--oom-score-adj", "321",
                      "--hostname", "probe2"],
        "P3": ["-t"],
    }
    report = []
    for name, opts in ctrs.items():
        cid = sh("docker", "run", "-d", "--label", "execcost=1", *opts, IMAGE,
                 "sleep", "100000")
        st = json.loads(sh("runc", "--root", RUNC_ROOT, "state", cid))
        with open(os.path.join(st["bundle"], "config.json")) as f:
            spec = json.load(f)
        with open(os.path.join(OUT, f"profile_{name}_spec_process.json"), "w") as f:
            json.dump(spec["process"], f, indent=1)
        paths = {"a_api": lambda: run_api(cid), "cli": lambda: run_cli(cid),
                 "b_runc": lambda: run_runc(cid), "c_ctr": lambda: run_ctr(cid)}
        if name == "P3":
            paths["b_runc_tty_false"] = lambda: run_runc(cid, ["--tty=false"])
        outs = {}
        for pname, fn in paths.items():
            rc, so, se = fn()
            outs[pname] = so
            with open(os.path.join(OUT, f"profile_{name}_{pname}.txt"), "w") as f:
                f.write(f"# rc={rc}\n# stderr={se!r}\n{so}")
            report.append(f"### {name} {pname}: rc={rc} stderr={se.strip()[:300]!r}")
        ref = outs["a_api"].splitlines()
        for pname, so in outs.items():
            if pname == "a_api":
                continue
            d = list(difflib.unified_diff(ref, so.splitlines(), f"{name}/a_api",
                                          f"{name}/{pname}", n=0, lineterm=""))
            report.append(f"--- diff {name}: a_api vs {pname}: "
                          f"{'IDENTICAL' if not d else ''}")
            report.extend(d[2:])
    txt = "\n".join(report)
    with open(os.path.join(OUT, "profile_diff.txt"), "w") as f:
        f.write(txt + "\n")
    print(txt)
    if "--keep" not in sys.argv:
        sh("sh", "-c", "ids=$(docker ps -aq --filter label=execcost=1); "
           "[ -z \"$ids\" ] || docker rm -f $ids >/dev/null")


if __name__ == "__main__":
    main()
