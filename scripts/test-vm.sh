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
VM_MEMORY=${VM_MEMORY:-4G}
CARGO=${CARGO:-cargo}
IMAGE=${BUSYBOX_IMAGE:-dockerlet.local/busybox:1}

# What the image is built from: a change to any of these builds a new one.
IMAGE_INPUTS=(scripts/vm/build-image.sh scripts/vm/guest/*)

log() {
    echo "test-vm: $*" >&2
}

die() {
    log "$*"
    exit 1
}

# Name every missing tool at once, with the command that installs it, instead of failing on
# the first one halfway through.
check_requirements() {
    local building=$1 missing=() tool
    local -A package=(
        [qemu-system-x86_64]=qemu-system-x86 [qemu-img]=qemu-utils [docker]=docker.io
        [python3]=python3 [debootstrap]=debootstrap [mkfs.ext4]=e2fsprogs
    )
    local tools=(qemu-system-x86_64 qemu-img docker python3)
    if [ "$building" = yes ]; then
        tools+=(debootstrap mkfs.ext4)
    fi
    for tool in "${tools[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("${package[$tool]} (for $tool)")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        log "missing: ${missing[*]}"
        die "install them with scripts/ensure-test-tools.sh (or apt-get install qemu-system-x86 qemu-utils debootstrap e2fsprogs)"
    fi
    if [ "$building" = yes ] && [ "$(id -u)" -ne 0 ]; then
        die "building the guest image needs root (debootstrap chroots and writes root-owned files); run as root once, later runs boot the cached image"
    fi
}

image_key() {
    cat "${IMAGE_INPUTS[@]}" | sha256sum | cut -c1-16
}

# Build the image for $1 unless it is cached; concurrent callers wait for one build.
ensure_image() {
    local dir=$1 started
    exec 8>"$VM_DIR/build.lock"
    flock 8
    if [ -f "$dir/ready" ]; then
        log "guest image cached: $dir"
        flock -u 8
        return
    fi
    check_requirements yes
    log "building the guest image (about 2 minutes; log: $dir.partial/debootstrap.log)"
    started=$(date +%s)
    rm -rf "$dir.partial"
    scripts/vm/build-image.sh "$dir.partial"
    touch "$dir.partial/ready"
    mv "$dir.partial" "$dir"
    echo "image_build_seconds=$(($(date +%s) - started))" >>"$dir/build-stats"
    # Older images are GBs each; only the current one is used.
    find "$VM_DIR" -mindepth 1 -maxdepth 1 -name 'image-*' ! -path "$dir" -exec rm -rf {} +
    flock -u 8
}

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
    qemu-img create -q -f qcow2 -b "$image/base.img" -F raw "$RUN_DIR/overlay.qcow2"
    log "booting the guest (TCG; console: $RUN_DIR/console.log)"
    # TCG: guests hang with KVM on this kind of host. mitigations=off: a throwaway test guest
    # gains speed under emulation and has nothing to protect. panic=10 with -no-reboot: a
    # kernel panic ends qemu instead of rebooting into the same panic.
    qemu-system-x86_64 \
        -accel tcg -cpu max -m "$VM_MEMORY" -smp 2 \
        -nographic -monitor none -serial "file:$RUN_DIR/console.log" -no-reboot -nic none \
        -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 panic=10 mitigations=off" \
        -drive "file=$RUN_DIR/overlay.qcow2,if=virtio,format=qcow2" \
        -virtfs "local,path=$RUN_DIR/share,mount_tag=share,security_model=none,id=share" \
        </dev/null >"$RUN_DIR/qemu.log" 2>&1 &
    QEMU_PID=$!
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
