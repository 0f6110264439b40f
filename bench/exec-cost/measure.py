#!/usr/bin/env python3
"""Measure where the CPU of one exec probe goes, per exec path (stdlib only).

Paths
  api    Docker Engine API over /var/run/docker.sock, raw HTTP like bollard:
         POST /containers/{id}/exec, POST /exec/{id}/start (hijacked stream read to EOF),
         GET /exec/{id}/json.  create+inspect share one keep-alive connection per worker;
         the start request needs its own connection because dockerd hijacks it.
  api+evN  as api, with N subscribers on GET /events?filters={"type":["container"]}
  cli    `docker exec <id> true`                (reference only)
  runc   `runc --root /run/docker/runtime-runc/moby exec <id> true`
  ctr    `ctr -a /var/run/docker/containerd/containerd.sock -n moby task exec --exec-id X <id> true`

CPU accounting (all deltas over the run, minus an idle window of the same length
measured right after the run):
  total      /proc/stat "cpu" user+nice+system+irq+softirq (tick-sampled, CONFIG_HZ=250)
  total2     NCPU*wall - (idle+iowait+steal) from /proc/stat; idle is measured precisely
             under NO_HZ, so this is the less biased machine total
  dockerd    /proc/<pid>/stat utime+stime (all threads, incl. exited ones)
  containerd same
  shim       sum of utime+stime of every containerd-shim-runc-v2
  shim-kids  sum of cutime+cstime of every shim = CPU of the short-lived `runc exec --detach`
             processes (runc waits for its CLONE_PARENT'ed `runc init` stages) and of the
             exec'd process itself (reparented to the shim, which is a child subreaper and
             reaps it).  => "runc+proc" for paths api/cli/ctr.
  client     this python process's own utime+stime (os.times)
  client-kids CPU of waited-for children of this python process (os.times children_*):
             runc (+ its init stages + the exec'd process) for path runc, the Go CLI for
             cli/ctr.
  in-ctr     sum of cpuacct.usage of the K containers (the exec'd process and the runc
             init stage after it joined the cgroup); a SUBSET of shim-kids/client-kids,
             shown for information only.
  other      total - (dockerd+containerd+shim+shim-kids+client+client-kids): kernel
             threads, other processes on the machine, noise.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

DOCKER_SOCK = "/var/run/docker.sock"
RUNC_ROOT = "/run/docker/runtime-runc/moby"
CTRD_SOCK = "/var/run/docker/containerd/containerd.sock"
IMAGE = "dockerlet.local/busybox:1"
HZ = os.sysconf("SC_CLK_TCK")
TICK_MS = 1000.0 / HZ
NCPU = os.cpu_count()


# ---------------------------------------------------------------- raw HTTP on unix socket
class UnixHTTP:
    """Minimal HTTP/1.1 client over a unix socket with keep-alive."""

    def __init__(self, path=DOCKER_SOCK):
        self.path = path
        self.sock = None
        self.buf = b""

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        self.sock = s
        self.buf = b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def _readline(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _readn(self, n):
        while len(self.buf) < n:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def request(self, method, path, body=None, hijack=False):
        if self.sock is None:
            self.connect()
        data = b"" if body is None else json.dumps(body).encode()
        hdr = f"{method} {path} HTTP/1.1\r\nHost: docker\r\n"
        if body is not None:
            hdr += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        elif method == "POST":
            hdr += "Content-Length: 0\r\n"
        if hijack:
            hdr += "Connection: Upgrade\r\nUpgrade: tcp\r\n"
        self.sock.sendall(hdr.encode() + b"\r\n" + data)
        status = int(self._readline().split()[1])
        headers = {}
        while True:
            line = self._readline()
            if not line:
                break
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if hijack:
            # 101 Switching Protocols (or 200): raw multiplexed stream until EOF
            out = self.buf
            self.buf = b""
            while True:
                d = self.sock.recv(65536)
                if not d:
                    break
                out += d
            self.close()
            return status, headers, out
        if headers.get("transfer-encoding") == "chunked":
            out = b""
            while True:
                n = int(self._readline().split(b";")[0], 16)
                if n == 0:
                    self._readline()
                    break
                out += self._readn(n)
                self._readn(2)
        else:
            out = self._readn(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, out


def demux(raw):
    """Split a docker raw-stream (non-tty) into stdout, stderr."""
    so, se, i = b"", b"", 0
    while i + 8 <= len(raw):
        t = raw[i]
        n = int.from_bytes(raw[i + 4:i + 8], "big")
        chunk = raw[i + 8:i + 8 + n]
        if t == 2:
            se += chunk
        else:
            so += chunk
        i += 8 + n
    return so, se


def api_exec(conn, cid, cmd):
    st, _, b = conn.request("POST", f"/containers/{cid}/exec",
                            {"AttachStdout": True, "AttachStderr": True, "Cmd": cmd})
    if st != 201:
        raise RuntimeError(f"exec create {st} {b!r}")
    eid = json.loads(b)["Id"]
    hj = UnixHTTP(conn.path)
    st, _, raw = hj.request("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False},
                            hijack=True)
    if st not in (101, 200):
        raise RuntimeError(f"exec start {st} {raw!r}")
    for _ in range(100):
        st, _, b = conn.request("GET", f"/exec/{eid}/json")
        info = json.loads(b)
        if not info.get("Running"):
            break
        time.sleep(0.001)
    so, se = demux(raw)
    return info.get("ExitCode"), so, se


# ---------------------------------------------------------------- CPU snapshots
def read_pidstat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime=14 stime=15 cutime=16 cstime=17
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def pids_by_exe(name):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        if os.path.basename(argv0) == name:
            out.append(int(p))
    return out


class Sampler:
    def __init__(self, cids):
        self.cids = cids
        self.dockerd = pids_by_exe("dockerd")
        self.containerd = pids_by_exe("containerd")
        assert len(self.dockerd) == 1 and len(self.containerd) == 1, (self.dockerd, self.containerd)

    def snap(self):
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal guest guest_nice
        total = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6]
        # idle/iowait are precise under NO_HZ (get_cpu_idle_time_us); user/system are
        # tick-sampled.  busy = ncpu*wall - idle - iowait - steal is the precise total.
        now = time.monotonic() * 1000.0
        notbusy = (cpu[3] + cpu[4] + cpu[7]) * TICK_MS
        d = read_pidstat(self.dockerd[0])
        c = read_pidstat(self.containerd[0])
        shim_self = shim_kids = 0
        for p in pids_by_exe("containerd-shim-runc-v2"):
            r = read_pidstat(p)
            if r:
                shim_self += r[0]
                shim_kids += r[1]
        t = os.times()
        inctr = 0
        for cid in self.cids:
            try:
                with open(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage") as f:
                    inctr += int(f.read())
            except OSError:
                pass
        return {
            "total": total * TICK_MS,
            "total2": NCPU * now - notbusy,
            "dockerd": d[0] * TICK_MS,
            "containerd": c[0] * TICK_MS,
            "shim": shim_self * TICK_MS,
            "shim-kids": shim_kids * TICK_MS,
            "client": (t.user + t.system) * 1000.0,
            "client-kids": (t.children_user + t.children_system) * 1000.0,
            "in-ctr": inctr / 1e6,
            "wall": now,
        }


def delta(a, b):
    return {k: b[k] - a[k] for k in a}


COMPONENTS = ["total", "total2", "dockerd", "containerd", "shim", "shim-kids", "client", "client-kids",
              "in-ctr"]


# ---------------------------------------------------------------- exec paths
def make_worker(path, cids, exec_seq):
    """Returns a function op(i) doing exec number i; one instance per worker thread."""
    if path.startswith("api"):
        conn = UnixHTTP()

        def op(i):
            rc, so, se = api_exec(conn, cids[i % len(cids)], ["true"])
            if rc != 0:
                raise RuntimeError(f"api exit {rc} {se!r}")
        return op
    if path == "cli":
        def op(i):
            subprocess.run(["docker", "exec", cids[i % len(cids)], "true"], check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        return op
    if path == "runc":
        def op(i):
            subprocess.run(["runc", "--root", RUNC_ROOT, "exec", cids[i % len(cids)], "true"],
                           check=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        return op
    if path == "ctr":
        def op(i):
            eid = f"execcost-{os.getpid()}-{next(exec_seq)}"
            subprocess.run(["ctr", "-a", CTRD_SOCK, "-n", "moby", "task", "exec",
                            "--exec-id", eid, cids[i % len(cids)], "true"],
                           check=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        return op
    raise ValueError(path)


class EventSubscriber(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.count = 0
        self.actions = {}
        self.ready = threading.Event()
        self.stop = False

    def run(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(DOCKER_SOCK)
        s.settimeout(0.5)
        q = "/events?filters=" + '%7B%22type%22%3A%5B%22container%22%5D%7D'
        s.sendall(f"GET {q} HTTP/1.1\r\nHost: docker\r\n\r\n".encode())
        buf = b""
        self.ready.set()
        while not self.stop:
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            buf += d
            # chunked JSON lines; count '"Action":"' occurrences
            while b'"Action":"' in buf:
                j = buf.index(b'"Action":"') + 10
                k = buf.index(b'"', j) if b'"' in buf[j:] else None
                if k is None:
                    break
                a = buf[j:k].decode().split(":")[0]
                self.actions[a] = self.actions.get(a, 0) + 1
                self.count += 1
                buf = buf[k:]
        s.close()


def run_path(sampler, path, cids, n, conc, subscribers=0):
    import itertools
    exec_seq = itertools.count()
    subs = []
    for _ in range(subscribers):
        s = EventSubscriber()
        s.start()
        s.ready.wait()
        subs.append(s)
    time.sleep(0.3)
    lat = []
    lat_lock = threading.Lock()
    idx = itertools.count()
    errors = []

    def worker():
        op = make_worker(path, cids, exec_seq)
        while True:
            i = next(idx)
            if i >= n:
                return
            t0 = time.monotonic()
            try:
                op(i)
            except Exception as e:  # noqa
                errors.append(repr(e))
            dt = (time.monotonic() - t0) * 1000.0
            with lat_lock:
                lat.append(dt)

    # warm-up (not measured)
    w = make_worker(path, cids, exec_seq)
    for i in range(min(5, n)):
        w(i)
    a = sampler.snap()
    ths = [threading.Thread(target=worker) for _ in range(conc)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    time.sleep(0.2)  # let dockerd/shim finish async work (exit events, reaping)
    b = sampler.snap()
    run = delta(a, b)
    # idle baseline of the same duration
    i0 = sampler.snap()
    time.sleep(run["wall"] / 1000.0)
    i1 = sampler.snap()
    idle = delta(i0, i1)
    ev = 0
    actions = {}
    for s in subs:
        s.stop = True
        ev += s.count
        for k, v in s.actions.items():
            actions[k] = actions.get(k, 0) + v
    for s in subs:
        s.join(2)
    res = {}
    scale = run["wall"] / idle["wall"] if idle["wall"] else 1.0
    for k in COMPONENTS:
        res[k] = (run[k] - idle[k] * scale) / n
    res["other"] = res["total"] - sum(res[k] for k in
                                      ["dockerd", "containerd", "shim", "shim-kids",
                                       "client", "client-kids"])
    res["other2"] = res["total2"] - (res["total"] - res["other"])
    lat.sort()
    res["p50"] = statistics.median(lat)
    res["p99"] = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
    res["wall_total_s"] = run["wall"] / 1000.0
    res["idle_total_ms"] = idle["total"] * scale
    res["errors"] = len(errors)
    res["error_sample"] = errors[:3]
    if subscribers:
        res["events_per_exec_per_sub"] = ev / subscribers / n
        res["event_actions"] = actions
    return res


# ---------------------------------------------------------------- containers
def sh(*args, **kw):
    return subprocess.run(list(args), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw).stdout.strip()


def start_containers(k):
    cids = []
    for _ in range(k):
        cids.append(sh("docker", "run", "-d", "--label", "execcost=1", IMAGE, "sleep", "100000"))
    return cids


def remove_containers():
    ids = sh("docker", "ps", "-aq", "--filter", "label=execcost=1").split()
    if ids:
        sh("docker", "rm", "-f", *ids)


def fmt_table(rows):
    cols = ["total", "total2", "dockerd", "containerd", "shim", "shim-kids", "client", "client-kids",
            "other", "other2", "in-ctr", "p50", "p99"]
    out = ["| path | conc | " + " | ".join(cols) + " | errors |",
           "|" + "---|" * (len(cols) + 3)]
    for (path, conc), r in rows:
        out.append(f"| {path} | {conc} | " + " | ".join(f"{r[c]:.2f}" for c in cols) +
                   f" | {r['errors']} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--conc", default="1,8")
    ap.add_argument("--paths", default="api,runc,ctr,cli")
    ap.add_argument("--events", default="1,8", help="subscriber counts for api+evN runs")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--json", default="results.json")
    ap.add_argument("--keep", action="store_true", help="do not remove containers at the end")
    args = ap.parse_args()

    remove_containers()
    cids = start_containers(args.k)
    try:
        time.sleep(2)
        sampler = Sampler(cids)
        plan = []
        for rep in range(args.reps):
            for conc in [int(c) for c in args.conc.split(",")]:
                for path in args.paths.split(","):
                    plan.append((path, conc, 0))
            for nsub in [int(x) for x in args.events.split(",") if x]:
                plan.append((f"api+ev{nsub}", 1, nsub))
        rows = []
        for path, conc, nsub in plan:
            print(f"== {path} conc={conc} n={args.n}", file=sys.stderr, flush=True)
            r = run_path(sampler, path, cids, args.n, conc, subscribers=nsub)
            print(json.dumps(r), file=sys.stderr, flush=True)
            rows.append(((path, conc), r))
        print("CPU ms per exec (idle-subtracted), wall ms p50/p99; "
              f"N={args.n} K={args.k} HZ={HZ}")
        print(fmt_table(rows))
        for (path, conc), r in rows:
            if "event_actions" in r:
                print(f"{path}: events/exec/subscriber={r['events_per_exec_per_sub']:.2f} "
                      f"actions={r['event_actions']}")
        with open(args.json, "w") as f:
            json.dump([{"path": p, "conc": c, **r} for (p, c), r in rows], f, indent=1)
    finally:
        if not args.keep:
            remove_containers()


if __name__ == "__main__":
    main()
