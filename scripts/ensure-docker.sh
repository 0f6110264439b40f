#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`: install Debian's docker.io if dockerd is
# missing, start dockerd in the background if it is not running, and wait for it.
# Idempotent: does nothing when the engine already answers.
set -euo pipefail

LOG=${DOCKERD_LOG:-/tmp/dockerd.log}
WAIT_SECS=${DOCKERD_WAIT_SECS:-60}

# A hung engine never answers: ask with a time limit.
answers() {
    timeout 10 docker info >/dev/null 2>&1
}

if answers; then
    exit 0
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        as_root apt-get update -q
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "$@"
}

if ! command -v dockerd >/dev/null 2>&1; then
    echo "ensure-docker: dockerd not found, installing docker.io" >&2
    apt_install docker.io
fi
if ! command -v docker >/dev/null 2>&1; then
    apt_install docker.io
fi

# True if a process named dockerd exists (no procps needed).
dockerd_running() {
    local comm
    for comm in /proc/[0-9]*/comm; do
        if [ "$(cat "$comm" 2>/dev/null)" = dockerd ]; then
            return 0
        fi
    done
    return 1
}

dockerd_pids() {
    local comm
    for comm in /proc/[0-9]*/comm; do
        if [ "$(cat "$comm" 2>/dev/null)" = dockerd ]; then
            basename "$(dirname "$comm")"
        fi
    done
}

# A dockerd that runs but does not answer within 30 s is hung (Docker 20.10 can deadlock when
# hundreds of containers are removed at once): stop it so a fresh one can start.
if dockerd_running; then
    deadline=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if answers; then
            echo "ensure-docker: docker is up" >&2
            exit 0
        fi
        sleep 1
    done
    echo "ensure-docker: dockerd runs but does not answer; restarting it" >&2
    as_root kill $(dockerd_pids) 2>/dev/null || true
    for _ in $(seq 1 30); do
        dockerd_running || break
        sleep 1
    done
    if dockerd_running; then
        as_root kill -9 $(dockerd_pids) 2>/dev/null || true
        sleep 2
    fi
fi

# A dockerd may be starting already (another caller, or a service manager): only start one if
# none is running.
if ! dockerd_running; then
    echo "ensure-docker: starting dockerd (log: $LOG)" >&2
    # setsid + nohup: dockerd outlives this script and the shell that ran it.
    as_root setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$WAIT_SECS"); do
    if answers; then
        echo "ensure-docker: docker is up" >&2
        exit 0
    fi
    sleep 1
done

echo "ensure-docker: docker did not answer within ${WAIT_SECS}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
