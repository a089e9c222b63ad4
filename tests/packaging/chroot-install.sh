#!/usr/bin/env bash
# chroot-install.sh DEBDIR
#
# Installs the packages built by build-debs.sh into a clean Debian 12 root
# and uses them there, as root:
#
#  1. debootstrap --variant=minbase bookworm from Debian's archive;
#  2. the packages' dependencies from the archive (apt-get satisfy), then a
#     system dbus-daemon and polkitd started by hand (no systemd runs in a
#     chroot), then a list of every file in the root;
#  3. `apt-get install ./*.deb` (npullmd, npullm-client, npullm-bridge,
#     npullm-tools, libnpullm-1-1, gir1.2-npullm-1.0: the desktop front ends
#     would pull in whole desktops); the npullm user and
#     /var/lib/npullm/models must exist;
#  4. the demo model (tools/npullm-demo-model) in /var/lib/npullm/models,
#     then `npullm-client generate` and `busctl call ... Complete`. npullmd is
#     started by D-Bus activation: the bus runs the activation file's
#     Exec= as its User= through dbus-daemon-launch-helper, which is how
#     the package starts it on a system without systemd; with systemd the
#     same file hands over to npullmd.service. It must run as npullm;
#  5. every package purged: the files then are those of step 2 plus only
#     /var/lib/npullm and its models (kept, as the npullm user is: they
#     are the administrator's data).
#
# Needs debootstrap, network access to deb.debian.org, and the tokenizer
# fixtures in tests/node_modules for the demo model. NPULLM_KEEP_CHROOT,
# NPULLM_CHROOT_FROM and NPULLM_DEBIAN_MIRROR: chroot-lib.sh.
set -euo pipefail

debdir=$(cd "${1:?usage: chroot-install.sh DEBDIR}" && pwd)
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
packages=(npullmd npullm-client npullm-bridge npullm-tools libnpullm-1-1 gir1.2-npullm-1.0)

chroot_name=chroot-install
# shellcheck source-path=SCRIPTDIR source=chroot-lib.sh
source "$top/tests/packaging/chroot-lib.sh"

# Every path in the root but the kernel's, the runtime's, apt's caches
# and the logs.
list_files() {
    in_root find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
        -o -path /var/cache/apt -o -path /var/lib/apt/lists -o -path /var/log \) -prune -o -print | sort
}

debs=()
for p in "${packages[@]}"; do
    f=$(ls "$debdir/${p}"_*.deb 2>/dev/null | head -1) || true  # none: said below
    [ -n "$f" ] || die "no ${p}_*.deb in $debdir"
    debs+=("$f")
done

make_root
mount_root
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$root/tmp/debs/"

# The dependencies first, so that the file list below holds them and the
# install of ours adds only ours.
ours=$(IFS='|'; echo "${packages[*]}")
deps=$(for f in "${debs[@]}"; do dpkg-deb -f "$f" Depends; echo; done | tr ',' '\n' |
       sed 's/^ *//; /^$/d' | grep -Ev "^($ours)( |$)" | sort -u | paste -sd, -)
step "dependencies from the archive: $deps"
in_root apt-get update -q >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "apt-get update"; }
in_root apt-get satisfy -y -q --no-install-recommends "$deps" >>"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log" >&2; die "apt-get satisfy"; }

step "system dbus-daemon and polkitd"
mkdir -p "$root/run/dbus"
pids+=("$(in_root dbus-daemon --system --fork --print-pid)")
# chroot and env exec: $! is polkitd itself
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin /usr/lib/polkit-1/polkitd --no-debug \
    >"$work/polkitd.log" 2>&1 &
pids+=("$!")
on_bus() {
    [ "$(in_root busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
         NameHasOwner s "$1" 2>/dev/null)" = "b true" ]
}
for _ in $(seq 100); do on_bus org.freedesktop.PolicyKit1 && break; sleep 0.1; done
on_bus org.freedesktop.PolicyKit1 || { cat "$work/polkitd.log" >&2; die "polkitd is not on the bus"; }

list_files >"$work/before.txt"
dpkg_before=$(in_root dpkg-query -W -f '${Package}\n' | sort)

step "apt-get install ./*.deb"
in_root sh -c 'apt-get install -y -q --no-install-recommends /tmp/debs/*.deb' >>"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log" >&2; die "apt-get install"; }
added=$(comm -13 <(echo "$dpkg_before") <(in_root dpkg-query -W -f '${Package}\n' | sort) | paste -sd' ' -)
[ "$added" = "$(printf '%s\n' "${packages[@]}" | sort | paste -sd' ' -)" ] ||
    die "apt installed more than our packages: $added"
uid=$(in_root id -u npullm) || die "no npullm user after the install"
[ "$(in_root stat -c %U "/var/lib/npullm/models")" = npullm ] ||
    die "/var/lib/npullm/models is missing or not owned by npullm"

step "the demo model into /var/lib/npullm/models"
mkdir "$work/demo"
model_dir=$(bash "$top/tools/npullm-demo-model" "$work/demo")
install -m 0644 "$model_dir/demo-llama.gguf" "$root/var/lib/npullm/models/"

step "npullm-client generate (npullmd by D-Bus activation)"
out=$(in_root timeout 120 npullm-client generate --max-tokens 16 --temperature 0 "Hello from a fresh Debian") ||
    die "npullm-client generate failed"
[ -n "$out" ] || die "npullm-client generate printed nothing"
owner=$(in_root busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
        GetConnectionUnixUser s org.npullm)
daemon=$(in_root busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
         GetConnectionUnixProcessID s org.npullm)
pids=("${daemon#u }" "${pids[@]}")
[ "$owner" = "u $uid" ] || die "org.npullm is owned by uid '${owner#u }', not npullm ($uid)"
say "generated: $out"

step "busctl call org.npullm ... Complete"
reply=$(in_root busctl --system --timeout=120 call org.npullm /org/npullm org.npullm.Manager Complete \
        'sa{sv}' "Hello again" 2 max_tokens u 16 temperature d 0) || die "busctl call Complete failed"
[[ $reply == 'sa{sv} "'* ]] || die "unexpected Complete reply: $reply"
say "Complete: ${reply:0:200}"

step "apt-get purge"
for (( i=${#pids[@]}-1; i>=0; i-- )); do
    kill "${pids[i]}" 2>/dev/null || true
    while kill -0 "${pids[i]}" 2>/dev/null; do sleep 0.1; done
done
pids=()
in_root apt-get purge -y -q "${packages[@]}" >>"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log" >&2; die "apt-get purge"; }
left=$(comm -13 "$work/before.txt" <(list_files) |
       grep -Ev '^/var/lib/npullm(/models(/demo-llama\.gguf)?)?$' || true)
[ -z "$left" ] || die "files left after the purge: $left"
in_root test -f /var/lib/npullm/models/demo-llama.gguf || die "the purge removed the models"
step "passed: installed, served through D-Bus activation as npullm, purged without leftovers"
