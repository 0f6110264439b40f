#!/usr/bin/env python3
"""dockerd CPU attributable to Docker events of the exec path.  Interleaved blocks of
N api execs (sequential) with 0, 1 and 8 subscribers on
GET /events?filters={"type":["container"]}; paired differences of dockerd CPU/exec.
(Emission into dockerd's event log happens for every exec regardless of subscribers and
cannot be switched off, so only the per-subscriber delivery cost is measurable.)"""
import os, sys, statistics, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import Sampler, run_path, start_containers, remove_containers  # noqa

R = int(sys.argv[1]) if len(sys.argv) > 1 else 6
N = int(sys.argv[2]) if len(sys.argv) > 2 else 150
remove_containers()
cids = start_containers(10)
try:
    s = Sampler(cids)
    d = {0: [], 1: [], 8: []}
    ev = {}
    orders = [(0, 1, 8), (1, 8, 0), (8, 0, 1)]
    for r in range(R):
        for nsub in orders[r % 3]:
            res = run_path(s, f"api+ev{nsub}" if nsub else "api", cids, N, 1, subscribers=nsub)
            d[nsub].append(res["dockerd"])
            if nsub:
                ev[nsub] = res["events_per_exec_per_sub"]
        print(r, {k: round(v[-1], 2) for k, v in d.items()}, flush=True)
    m = {k: statistics.mean(v) for k, v in d.items()}
    d1 = [a - b for a, b in zip(d[1], d[0])]
    d8 = [a - b for a, b in zip(d[8], d[0])]
    out = {"dockerd_ms_per_exec": m,
           "delta_1sub_mean": statistics.mean(d1), "delta_1sub_stdev": statistics.stdev(d1),
           "delta_8sub_mean": statistics.mean(d8), "delta_8sub_stdev": statistics.stdev(d8),
           "events_per_exec_per_subscriber": ev, "R": R, "N": N}
    print(json.dumps(out, indent=1))
    json.dump(out, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "events.json"), "w"), indent=1)
finally:
    remove_containers()
