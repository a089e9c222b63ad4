#!/usr/bin/env bash
# first-run-chroot.sh [PROMPT]
#
# Measures what a new user's first `tools/npullm-dev run` costs on a fresh
# Debian 12 machine, as root:
#
#  1. debootstrap --variant=minbase bookworm from Debian's archive (not
#     counted: it stands for the installed machine);
#  2. a copy of this checkout's files (tracked and untracked, without
#     tests/node_modules and build folders) in /src/npullm, the kernel's file
#     systems mounted;
#  3. `tools/npullm-dev run PROMPT` in the root, timed: it installs its
#     package sets, builds npullmd and npullm-client, downloads the
#     tokenizer, generates the demo model and streams a generation through
#     npullmd on a private bus;
#  4. a report: packages installed, bytes downloaded (the archives apt
#     fetched for the run), wall time and the machine's load, and where the time went
#     (apt, meson and ninja, the demo model, the generation).
#
# Unlike a real machine, the root runs no system bus and no systemd: the
# run takes its private-bus path, as on a machine without npullm installed.
# The host's local certificate authorities (/usr/local/share/ca-certificates)
# are copied in.
# On 2 shared cores (load 18-31) the run took 16-17.5 minutes (195 s of
# CPU), debootstrap 5.5 more, so it is not part of CI. Needs debootstrap and network access to deb.debian.org
# and registry.npmjs.org. NPULLM_KEEP_CHROOT, NPULLM_CHROOT_FROM and
# NPULLM_DEBIAN_MIRROR: chroot-lib.sh.
set -euo pipefail

prompt=${1:-"Write a haiku about a tiny neural processor."}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

chroot_name=first-run
# shellcheck source-path=SCRIPTDIR source=chroot-lib.sh
source "$top/tests/packaging/chroot-lib.sh"

make_root
mount_root

step "copying the checkout to /src/npullm"
mkdir -p "$root/src/npullm"
git -C "$top" ls-files -z --cached --others --exclude-standard |
    grep -zvE '^(tests/node_modules|build[^/]*)(/|$)' |
    (cd "$top" && tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null) |
    tar -xf - -C "$root/src/npullm"

# The host's own certificate authorities (a TLS-inspecting proxy's, for
# example): a machine on the same network has them too, and the ca-certificates
# package the run installs takes them into its bundle.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

dpkg_before=$(in_root dpkg-query -W -f '${Package}\n' | sort)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
archives=$root/var/cache/apt/archives
debs_before=$(cd "$archives" && ls -- *.deb 2>/dev/null || true)  # debootstrap's own

# Each line the run prints gets the seconds since its start, so the log
# shows where the time went.
step "tools/npullm-dev run (log: $work/run.log)"
times >"$work/cpu-before"  # the builtin: this shell's children, the run's processes
start=$(date +%s)
rc=0
in_root HOME=/root sh -c 'cd /src/npullm && exec tools/npullm-dev run "$1"' sh "$prompt" 2>&1 |
    while IFS= read -r line || [ -n "$line" ]; do
        printf -v now '%(%s)T' -1
        printf '%5d s  %s\n' $(( now - start )) "$line"
    done >"$work/run.log" || rc=$?
seconds=$(( $(date +%s) - start ))
times >"$work/cpu-after"
# CPU seconds (user + system) of the run: what a loaded machine does not change
cpu_seconds() { tail -1 "$1" | sed 's/m/ /g; s/s//g' | awk '{ print $1 * 60 + $2 + $3 * 60 + $4 }'; }
cpu=$(awk -v a="$(cpu_seconds "$work/cpu-after")" -v b="$(cpu_seconds "$work/cpu-before")" \
      'BEGIN { printf "%.0f", a - b }')
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
marker='starting npullmd on a private bus'
generation=$(sed -n "/$marker/,\$p" "$work/run.log" | tail -n +2 | cut -c10-)
[ $rc -eq 0 ] || { tail -30 "$work/run.log" >&2; die "tools/npullm-dev run exited with $rc"; }
[ -n "$generation" ] || { tail -30 "$work/run.log" >&2; die "no generation was streamed"; }

added=$(comm -13 <(echo "$dpkg_before") <(in_root dpkg-query -W -f '${Package}\n' | sort))
download=$(cd "$archives" && comm -13 <(echo "$debs_before") <(ls -- *.deb 2>/dev/null) |
           xargs -r stat -c %s -- | awk '{ s += $1 } END { print s + 0 }')
disk=0
[ -z "$added" ] ||
    disk=$(in_root dpkg-query -W -f '${Installed-Size}\n' $added | awk '{ s += $1 } END { print s + 0 }')

# where the time went: the first line of each phase in the log
phase() { awk -v pat="$1" 'index($0, pat) { print $1; exit }' "$work/run.log"; }
say "generation: $(head -c 400 <<<"$generation" | tr '\n' ' ')"
say "phases (s from the start): apt-get $(phase 'installing Debian packages'), meson $(phase 'The Meson build system')," \
    "ninja $(phase 'ninja: Entering directory'), tokenizer $(phase 'npullm-fetch-npm: downloading')," \
    "demo model $(phase 'generating a random-weight'), private bus $(phase "$marker")"
say "RESULT: tools/npullm-dev run on a fresh Debian 12 (minbase) root: $(wc -w <<<"$added") packages installed" \
    "($(( disk / 1024 )) MiB on disk), $(( download / 1000000 )) MB downloaded, $seconds s wall time ($cpu s of CPU) on $(nproc) cores of" \
    "$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1)" \
    "(load average before: $load_before, after: $load_after)"
