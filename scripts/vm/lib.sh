#!/usr/bin/env bash
# Shared by scripts/test-vm.sh and scripts/test-vm-pair.sh (sourced, from the repository's
# root): the guest image's cache key and build, the requirement check, logging, and starting
# qemu guests under TCG.
#
# Needs ROOT (the repository) and VM_DIR (target/vm) set by the caller.

# What the image is built from: a change to any of these builds a new one.
IMAGE_INPUTS=(scripts/vm/build-image.sh scripts/vm/guest/*)

log() {
    echo "${LOG_PREFIX:-test-vm}: $*" >&2
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

# Start a guest of image $2 in the background, in run directory $1 (its overlay, console and qemu
# logs there, its 9p share $1/share), with extra qemu arguments after them (its network: `-nic
# none` when none is given). Sets QEMU_PID. TCG: guests hang with KVM on this kind of host.
# mitigations=off: a throwaway test guest gains speed under emulation and has nothing to
# protect. panic=10 with -no-reboot: a kernel panic ends qemu instead of rebooting into the same
# panic.
start_qemu() {
    local run=$1 image=$2
    shift 2
    local net=("$@")
    [ "${#net[@]}" -gt 0 ] || net=(-nic none)
    qemu-img create -q -f qcow2 -b "$image/base.img" -F raw "$run/overlay.qcow2"
    qemu-system-x86_64 \
        -accel tcg -cpu max -m "${VM_MEMORY:-4G}" -smp 2 \
        -nographic -monitor none -serial "file:$run/console.log" -no-reboot "${net[@]}" \
        -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 panic=10 mitigations=off" \
        -drive "file=$run/overlay.qcow2,if=virtio,format=qcow2" \
        -virtfs "local,path=$run/share,mount_tag=share,security_model=none,id=share" \
        </dev/null >"$run/qemu.log" 2>&1 &
    QEMU_PID=$!
}

