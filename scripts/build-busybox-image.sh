#!/usr/bin/env bash
# Build the local test/demo image dockerlet.local/busybox:1 from Debian's static busybox, with no
# registry: a rootfs with bin/busybox and one symlink per applet, imported with `docker import`.
# Idempotent (does nothing if the image exists) and safe to run concurrently (flock).
set -euo pipefail

IMAGE=${BUSYBOX_IMAGE:-dockerlet.local/busybox:1}
LOCK=${BUSYBOX_IMAGE_LOCK:-/tmp/dockerlet-busybox-image.lock}

have_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1
}

if have_image; then
    exit 0
fi

# Serialise concurrent builders; the loser finds the image built and stops.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$LOCK"
    flock 9
    if have_image; then
        exit 0
    fi
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! dpkg -s busybox-static >/dev/null 2>&1; then
    echo "build-busybox-image: installing busybox-static" >&2
    as_root apt-get update -q
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q busybox-static
fi
BUSYBOX=/bin/busybox

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
rootfs=$workdir/rootfs

mkdir -p "$rootfs"/{bin,tmp,etc,proc,sys,dev,var/www,root,usr}
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/root"
cp "$BUSYBOX" "$rootfs/bin/busybox"
chmod 755 "$rootfs/bin/busybox"
# `busybox --list` prints applet names; link each into bin/ (the image's PATH is /bin).
for applet in $("$BUSYBOX" --list); do
    if [ "$applet" != busybox ] && [ ! -e "$rootfs/bin/$applet" ]; then
        ln -s busybox "$rootfs/bin/$applet"
    fi
done
# Scripts written for a full distribution look in /sbin, /usr/bin or /usr/sbin.
ln -s bin "$rootfs/sbin"
ln -s ../bin "$rootfs/usr/bin"
ln -s ../bin "$rootfs/usr/sbin"

cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP

echo "build-busybox-image: importing $IMAGE" >&2
tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . |
    docker import \
        --change 'CMD ["sh"]' \
        --change 'ENV PATH=/bin' \
        - "$IMAGE" >/dev/null
echo "build-busybox-image: built $IMAGE" >&2
