#!/usr/bin/env python3
"""Check what the guest's graceful node shutdown wrote into the share (scripts/vm/shutdown.sh,
then `systemctl poweroff` in scripts/vm/job.sh), against kubelet's shutdown manager
(pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go; e2e test/e2e_node/node_shutdown_linux_test.go):

- the agent raised logind's InhibitDelayMaxSec to 10 s with the 99-kubelet.conf drop-in and held
  a delay inhibitor lock named "kubelet";
- logind's PrepareForShutdown reached it (not SIGUSR1), it stopped the pods and said it was done;
- the ordinary pod's preStop hook ran first, the critical pod's after the ordinary group's 5 s;
- while the critical pod still ran, the ordinary one was Failed, reason Terminated, kubelet's
  message and a DisruptionTarget condition; no pod was ever Failed and Ready at once.

Usage: check-shutdown.py <share>/out/shutdown. Exits 1 naming every check that failed.
"""
import glob
import json
import os
import sys

MESSAGE = "Pod was terminated in response to imminent node shutdown."


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def main(directory):
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    log = read(os.path.join(directory, "agent.log"))
    check("InhibitDelayMaxSec=10" in read(os.path.join(directory, "99-kubelet.conf")),
          "the logind drop-in 99-kubelet.conf sets InhibitDelayMaxSec=10")
    check("10000000" in read(os.path.join(directory, "inhibit-delay")),
          "logind's InhibitDelayMaxUSec is 10 s after the reload")
    inhibitors = read(os.path.join(directory, "inhibitors"))
    check("kubelet" in inhibitors and "delay" in inhibitors, "a delay inhibitor lock named kubelet is held")
    check("holding a logind delay inhibitor lock" in log, "the agent says it holds the lock")
    check(any("Shutdown manager detected new shutdown event" in line and "shutdown" in line.split("event")[-1]
              for line in log.splitlines()),
          "PrepareForShutdown(true) reached the agent")
    check("Received shutdown signal from USR1" not in log, "the shutdown came from logind, not SIGUSR1")
    check("Shutdown manager completed processing shutdown event" in log,
          "the agent stopped the pods and released the lock")

    marks = []
    for line in read(os.path.join(directory, "marks", "prestop")).splitlines():
        name, _, at = line.partition(" ")
        marks.append((name, float(at)))
    names = [m[0] for m in marks]
    check(names == ["ordinary", "critical"], f"preStop hooks ran ordinary first, then critical: {marks}")
    poweroff = read(os.path.join(directory, "poweroff-at")).strip()
    if len(marks) == 2 and poweroff:
        began = float(poweroff)
        check(marks[0][1] >= began, "the ordinary pod's preStop ran after the power-off began")
        between = marks[1][1] - marks[0][1]
        check(between >= 4.0, f"the critical group began after the ordinary group's 5 s ({between:.1f} s)")
        check(marks[1][1] - began <= 12.0, f"both groups within the 10 s grace ({marks[1][1] - began:.1f} s)")

    snapshots = []
    for path in sorted(glob.glob(os.path.join(directory, "pods-*.json"))):
        try:
            snapshots.append(json.loads(read(path))["items"])
        except (ValueError, KeyError):
            pass
    check(len(snapshots) > 0, f"/pods was saved during the shutdown ({len(snapshots)} snapshots)")

    def condition(pod, kind):
        for c in pod.get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return c
        return {}

    seen_ordinary_failed_first = False
    failed_and_ready = []
    for pods in snapshots:
        by = {p["metadata"]["name"].split("-")[0]: p for p in pods}
        for pod in pods:
            status = pod.get("status", {})
            if status.get("phase") == "Failed" and condition(pod, "Ready").get("status") == "True":
                failed_and_ready.append(pod["metadata"]["name"])
        ordinary, critical = by.get("ordinary"), by.get("critical")
        if ordinary and critical:
            status = ordinary.get("status", {})
            target = condition(ordinary, "DisruptionTarget")
            if (status.get("phase") == "Failed" and status.get("reason") == "Terminated"
                    and status.get("message") == MESSAGE and target.get("status") == "True"
                    and target.get("reason") == "TerminationByKubelet"
                    and critical.get("status", {}).get("phase") == "Running"):
                seen_ordinary_failed_first = True
    check(seen_ordinary_failed_first,
          "the ordinary pod was Failed (Terminated, kubelet's message, DisruptionTarget) while the critical one ran")
    check(not failed_and_ready, f"no pod was Failed and Ready at once {sorted(set(failed_and_ready))}")

    if failures:
        print(f"check-shutdown: {len(failures)} check(s) failed; the agent's log: {directory}/agent.log")
        return 1
    print("check-shutdown: graceful node shutdown as kubelet's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
