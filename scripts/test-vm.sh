#!/usr/bin/env bash
# `make test-vm`: run the agent and the host_compat tests (integration-tests/tests/host_compat.rs)
# inside a real Debian 12 guest, a host as users have it (systemd, cgroup v2, Debian's docker.io
# on the systemd cgroup driver), under qemu with TCG.
#
# 1. The guest disk is built once by scripts/vm/build-image.sh (debootstrap, needs root) and
#    cached in target/vm/image-<key>/, the key a hash of that script and scripts/vm/guest/: an
#    unchanged tree boots the cached image.
# 2. Every run boots a fresh copy-on-write overlay of it, so runs start clean.
# 3. The job goes in through a 9p share: the agent binary, the host_compat test binary, the
#    test image as a `docker save` tarball, and scripts/vm/job.sh. The guest runs it once
#    Docker is up, writes its output and exit code to the share, and powers off.
#
# Exits non-zero when the job failed or the guest did not finish in time, saying where the logs are (target/vm/run/).
#
# Environment: VM_TIMEOUT (seconds for the whole VM, default 1200), VM_BOOT_TIMEOUT (seconds
# until the job starts, default 300), VM_TEST_ARGS (arguments for the test binary, e.g.
# `--include-ignored` or a test name), VM_MEMORY (default 4G), DOCKERLET_BIN (the agent
# binary; default: cargo builds target/debug/dockerlet), CARGO.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

VM_DIR=$ROOT/target/vm
RUN_DIR=$VM_DIR/run
VM_TIMEOUT=${VM_TIMEOUT:-1200}
VM_BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-300}
VM_TEST_ARGS=${VM_TEST_ARGS:-}
CARGO=${CARGO:-cargo}
IMAGE=${BUSYBOX_IMAGE:-dockerlet.local/busybox:1}

# shellcheck source=scripts/vm/lib.sh
. scripts/vm/lib.sh

# The agent binary, the host_compat test binary and the test image, into the share.
prepare_share() {
    local share=$1 agent tests
    mkdir -p "$share"
    if [ -n "${DOCKERLET_BIN:-}" ]; then
        agent=$DOCKERLET_BIN
    else
        # The same command as `make build` and `make test`: other flags would resolve other
        # features and build the agent a second time.
        "$CARGO" build --workspace --bins
        agent=${CARGO_TARGET_DIR:-$ROOT/target}/debug/dockerlet
    fi
    [ -x "$agent" ] || die "no agent binary at $agent"
    # The test binary's path has a hash in it: cargo's JSON messages name it.
    # --workspace, as `make test` builds it: features resolve the same, nothing is rebuilt.
    tests=$("$CARGO" test --workspace --test host_compat --no-run --message-format=json |
        python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "host_compat" and msg.get("executable"):
        print(msg["executable"])')
    [ -n "$tests" ] || die "cargo did not name the host_compat test binary"
    cp "$agent" "$share/dockerlet"
    cp "$tests" "$share/host_compat"
    cp scripts/vm/job.sh "$share/job.sh"
    cp scripts/vm/shutdown.sh "$share/shutdown.sh"
    printf '%s\n' "$VM_TEST_ARGS" >"$share/test-args"

    scripts/build-busybox-image.sh
    docker save -o "$share/busybox.tar" "$IMAGE"
}

# Boot the overlay and watch it; returns qemu's exit status, or 124 when the guest ran past
# VM_TIMEOUT, 125 when it did not start the job within VM_BOOT_TIMEOUT (a boot that went wrong
# costs minutes, not the whole timeout).
boot() {
    local image=$1 status=0 started=$SECONDS job_seen=no
    log "booting the guest (TCG; console: $RUN_DIR/console.log)"
    start_qemu "$RUN_DIR" "$image"
    while kill -0 "$QEMU_PID" 2>/dev/null; do
        if [ "$job_seen" = no ] && [ -f "$RUN_DIR/share/out/timing" ]; then
            job_seen=yes
            log "the guest started the job after $((SECONDS - started)) s; tests running"
        fi
        if [ "$job_seen" = no ] && [ $((SECONDS - started)) -ge "$VM_BOOT_TIMEOUT" ]; then
            stop_qemu
            return 125
        fi
        if [ $((SECONDS - started)) -ge "$VM_TIMEOUT" ]; then
            stop_qemu
            return 124
        fi
        sleep 2
    done
    wait "$QEMU_PID" || status=$?
    QEMU_PID=
    return "$status"
}

# Stop the qemu this script started (on a timeout, or when the script is interrupted).
stop_qemu() {
    if [ -n "${QEMU_PID:-}" ]; then
        kill "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
        QEMU_PID=
    fi
}

# Print the job's output and timings; fail unless the guest finished and the job passed.
report() {
    local qemu_status=$1 out=$RUN_DIR/share/out code
    if [ -f "$out/job.log" ]; then
        echo "---- guest job output ($out/job.log)"
        cat "$out/job.log"
        echo "----"
    fi
    [ -f "$out/timing" ] && sed 's/^/test-vm: guest /' "$out/timing" >&2
    case $qemu_status in
    124)
        tail -n 30 "$RUN_DIR/console.log" >&2 || true
        die "the guest did not finish within ${VM_TIMEOUT}s (VM_TIMEOUT); console: $RUN_DIR/console.log"
        ;;
    125)
        tail -n 30 "$RUN_DIR/console.log" >&2 || true
        die "the guest did not start the job within ${VM_BOOT_TIMEOUT}s (VM_BOOT_TIMEOUT); console: $RUN_DIR/console.log"
        ;;
    esac
    if [ ! -f "$out/exit-code" ]; then
        tail -n 30 "$RUN_DIR/console.log" "$RUN_DIR/qemu.log" >&2 || true
        die "the guest stopped (qemu exit $qemu_status) without finishing the job; console: $RUN_DIR/console.log"
    fi
    code=$(cat "$out/exit-code")
    if [ "$code" != 0 ]; then
        die "the job failed (exit $code); logs: $out/job.log, guest journal: $out/journal.log, console: $RUN_DIR/console.log"
    fi
    # The power-off that ended the guest was the graceful node shutdown check.
    echo "---- graceful node shutdown ($out/shutdown)"
    python3 scripts/vm/check-shutdown.py "$out/shutdown" ||
        die "graceful node shutdown failed its checks; the agent's log: $out/shutdown/agent.log, console: $RUN_DIR/console.log"
    log "the job passed; logs in $RUN_DIR"
}

main() {
    trap stop_qemu EXIT
    local key image started booted ended qemu_status=0
    started=$(date +%s)
    check_requirements no
    mkdir -p "$VM_DIR"
    key=$(image_key)
    image=$VM_DIR/image-$key
    ensure_image "$image"

    # One run at a time per tree: they share target/vm/run.
    exec 9>"$VM_DIR/run.lock"
    flock 9
    rm -rf "$RUN_DIR"
    mkdir -p "$RUN_DIR"
    prepare_share "$RUN_DIR/share"

    booted=$(date +%s)
    boot "$image" || qemu_status=$?
    ended=$(date +%s)
    {
        echo "vm_seconds=$((ended - booted))"
        echo "total_seconds=$((ended - started))"
    } >"$RUN_DIR/timing"
    log "VM $((ended - booted)) s (boot, job, power-off); total $((ended - started)) s with image and binaries"
    report "$qemu_status"
}

main "$@"
