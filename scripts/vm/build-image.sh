#!/usr/bin/env bash
# Build the Debian 12 guest of scripts/test-vm.sh into OUT_DIR: a raw ext4 disk (base.img) and
# the guest's kernel and initrd (vmlinuz, initrd.img), taken out of its /boot so qemu boots them
# with -kernel/-initrd and the disk needs no bootloader and no partition table.
#
# The guest is a host "as users have it": systemd as PID 1, the unified cgroup hierarchy (v2),
# Debian's docker.io with its default (systemd) cgroup driver, AppArmor. Once docker.service is
# up it mounts the 9p share `share` on /share, runs /share/job.sh (dockerlet-vm-job.service,
# scripts/vm/guest/), and powers off.
#
# Needs root (debootstrap chroots, files owned by root) and no loop device: `mkfs.ext4 -d`
# writes the tree straight into the image file. scripts/test-vm.sh calls this when its cache
# key (a hash of this file and scripts/vm/guest/) changes.
#
# Usage: scripts/vm/build-image.sh OUT_DIR
set -euo pipefail

MIRROR=${VM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# The disk is sparse: 8 GiB of room for Docker's images and containers in the guest, about
# 1 GiB written.
DISK_SIZE=8G
HOSTNAME=dockerlet-vm

# minbase has no init, no kernel and no Docker. Beyond the brief's list:
# - e2fsprogs, util-linux: fsck and mount helpers systemd expects for the root and /share;
# - iptables: dockerd's bridge network (a docker.io dependency, named here to be explicit);
# - systemd-timesyncd is left out: the guest has no network, its clock comes from qemu's RTC.
PACKAGES=(
    systemd systemd-sysv udev dbus
    linux-image-amd64 initramfs-tools kmod
    docker.io iptables apparmor
    busybox-static iproute2 procps util-linux e2fsprogs
    curl python3 ca-certificates
)

GUEST_FILES=$(cd "$(dirname "$0")/guest" && pwd)

log() {
    echo "build-image: $*" >&2
}

# Unmount whatever debootstrap left mounted under the tree (it unmounts on success; a failed
# run may leave /proc or /sys), so removing the tree cannot reach the host's.
unmount_under() {
    local root=$1 point
    awk -v root="$root/" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r point; do
            umount -l "$point"
        done
}

bootstrap() {
    local rootfs=$1 include
    include=$(IFS=,; echo "${PACKAGES[*]}")
    log "debootstrap --variant=minbase $SUITE from $MIRROR"
    debootstrap --variant=minbase --include="$include" "$SUITE" "$rootfs" "$MIRROR" \
        >"$OUT/debootstrap.log" 2>&1 || {
        tail -n 30 "$OUT/debootstrap.log" >&2
        log "debootstrap failed; its log: $OUT/debootstrap.log"
        return 1
    }
}

# Write stdin to the file $1 of the tree with mode $2.
put() {
    local path=$ROOTFS$1 mode=$2
    mkdir -p "$(dirname "$path")"
    cat >"$path"
    chmod "$mode" "$path"
}

configure() {
    echo "$HOSTNAME" | put /etc/hostname 644
    put /etc/hosts 644 <<HOSTS
127.0.0.1 localhost
127.0.1.1 $HOSTNAME
::1 localhost ip6-localhost ip6-loopback
HOSTS
    # The root is the virtio disk qemu gives (no partition table); no fsck: every run boots a
    # fresh copy-on-write overlay of a clean image. The 9p share is mounted by the job runner,
    # not here: a mount from fstab can race the loading of 9pnet_virtio and fail the job.
    put /etc/fstab 644 <<'FSTAB'
/dev/vda  /  ext4  rw,errors=remount-ro  0 0
FSTAB
    mkdir -p "$ROOTFS/share"

    put /etc/systemd/system/dockerlet-vm-job.service 644 <"$GUEST_FILES/dockerlet-vm-job.service"
    put /usr/local/sbin/dockerlet-vm-job 755 <"$GUEST_FILES/dockerlet-vm-job"
    ln -sf /etc/systemd/system/dockerlet-vm-job.service \
        "$ROOTFS/etc/systemd/system/multi-user.target.wants/dockerlet-vm-job.service"
    ln -sf /lib/systemd/system/multi-user.target "$ROOTFS/etc/systemd/system/default.target"
    # Periodic jobs that only cost boot time in a VM that lives for one job.
    local unit
    for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
        e2scrub_reap.service; do
        ln -sf /dev/null "$ROOTFS/etc/systemd/system/$unit"
    done
    # No password: nobody logs in (the serial console only shows the boot).
    passwd_root_locked

    [ -e "$ROOTFS/etc/systemd/system/multi-user.target.wants/docker.service" ] || {
        log "docker.service is not enabled in the image"
        return 1
    }
}

passwd_root_locked() {
    chroot "$ROOTFS" passwd -l root >/dev/null
}

# The kernel and initrd debootstrap installed (one of each: a fresh tree has one kernel).
extract_boot() {
    local kernel initrd
    kernel=$(find "$ROOTFS/boot" -maxdepth 1 -name 'vmlinuz-*' | sort | tail -n 1)
    initrd=$(find "$ROOTFS/boot" -maxdepth 1 -name 'initrd.img-*' | sort | tail -n 1)
    if [ -z "$kernel" ] || [ -z "$initrd" ]; then
        log "no kernel or initrd in $ROOTFS/boot"
        return 1
    fi
    cp "$kernel" "$OUT/vmlinuz"
    cp "$initrd" "$OUT/initrd.img"
    basename "$kernel" | sed 's/^vmlinuz-//' >"$OUT/kernel-version"
}

make_disk() {
    # The package cache and lists are not needed in the guest (it installs nothing).
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    rm -f "$OUT/base.img"
    mkfs.ext4 -q -L dockerlet-vm -d "$ROOTFS" "$OUT/base.img" "$DISK_SIZE"
}

main() {
    [ $# -eq 1 ] || {
        echo "usage: $0 OUT_DIR" >&2
        exit 2
    }
    OUT=$1
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    ROOTFS=$OUT/rootfs
    unmount_under "$ROOTFS"
    rm -rf "$ROOTFS"
    trap 'unmount_under "$ROOTFS"; rm -rf "$ROOTFS"' EXIT

    local t0 t1 t2
    t0=$(date +%s)
    bootstrap "$ROOTFS"
    t1=$(date +%s)
    configure
    extract_boot
    make_disk
    t2=$(date +%s)
    {
        echo "debootstrap_seconds=$((t1 - t0))"
        echo "configure_and_mkfs_seconds=$((t2 - t1))"
        echo "tree_bytes=$(du -sb "$ROOTFS" | cut -f1)"
        echo "image_allocated_bytes=$(du -B1 "$OUT/base.img" | cut -f1)"
    } >"$OUT/build-stats"
    log "built $OUT/base.img in $((t2 - t0)) s (debootstrap $((t1 - t0)) s)"
}

main "$@"
