# chroot-lib.sh: sourced by the scripts in tests/packaging that work in a
# clean Debian 12 root (chroot-install.sh, first-run-chroot.sh), as root.
#
# Makes a temporary folder under /var/tmp ($work) for the root ($root) and
# the logs; on exit it stops the processes listed in pids, unmounts what is
# listed in mounts (last first) and removes the folder. The caller sets
# chroot_name (the prefix of its messages) before sourcing.
#
#   NPULLM_DEBIAN_MIRROR=URL  the archive (default http://deb.debian.org/debian)
#   NPULLM_CHROOT_FROM=DIR    start from a copy of a bookworm root made by
#                             debootstrap before (saves its minutes while
#                             working on a script)
#   NPULLM_KEEP_CHROOT=1      keep the root (its path is printed) for a look
#                             after a failure

mirror=${NPULLM_DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { printf '%s: %s\n' "$chroot_name" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }

work=$(mktemp -d /var/tmp/npullm-chroot.XXXXXX)
root=$work/root
pids=()
mounts=()

cleanup() {
    local rc=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    done
    local i
    for (( i=${#mounts[@]}-1; i>=0; i-- )); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
    done
    if [ "${NPULLM_KEEP_CHROOT:-}" = 1 ]; then
        say "kept $root"
    else
        rm -rf "$work"
    fi
    exit $rc
}
trap cleanup EXIT

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"; }

step_start=$(date +%s)
step() { say "$(( $(date +%s) - step_start )) s: $*"; }

# make_root: a debootstrap --variant=minbase bookworm root at $root
make_root() {
    if [ -n "${NPULLM_CHROOT_FROM:-}" ]; then
        step "copying $NPULLM_CHROOT_FROM"
        cp -a "$NPULLM_CHROOT_FROM" "$root"
    else
        step "debootstrap --variant=minbase bookworm ($mirror)"
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
            { tail -20 "$work/debootstrap.log" >&2; die "debootstrap"; }
    fi
}

# mount_root: the kernel's file systems and an empty /run, as on a booted
# machine (apt wants /dev/pts for its terminal log)
mount_root() {
    mount -t proc proc "$root/proc"; mounts+=("$root/proc")
    mount -t sysfs sysfs "$root/sys"; mounts+=("$root/sys")
    mount --bind /dev "$root/dev"; mounts+=("$root/dev")
    mount --bind /dev/pts "$root/dev/pts"; mounts+=("$root/dev/pts")
    mount -t tmpfs tmpfs "$root/run"; mounts+=("$root/run")
}
