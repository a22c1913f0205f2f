#!/usr/bin/env bash
# debs.sh DIR [-x ROOT] PACKAGE...: download (not install) into DIR the
# Debian packages it lacks, updating the package lists once and retrying if
# they are missing or stale; with -x, unpack them all into a fresh ROOT,
# unless ROOT already holds exactly these .debs.
set -euo pipefail
dir=${1:?usage: debs.sh DIR [-x ROOT] PACKAGE...}; shift
root=""
if [ "${1:-}" = -x ]; then root=$2; shift 2; fi
mkdir -p "$dir"
missing=""
for p in "$@"; do ls "$dir/${p}"_*.deb >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  (cd "$dir" && { apt-get ${KIP_APT_OPTS:-} download $missing >/dev/null 2>&1 \
    || { apt-get ${KIP_APT_OPTS:-} update -qq >/dev/null && apt-get ${KIP_APT_OPTS:-} download $missing >/dev/null; }; })
fi
[ -n "$root" ] || exit 0
files=$(for p in "$@"; do ls "$dir/${p}"_*.deb | tail -1; done)
if [ -f "$root/.debs" ] && [ "$(cat "$root/.debs")" = "$files" ]; then exit 0; fi
rm -rf "$root" && mkdir -p "$root"
for f in $files; do dpkg-deb -x "$f" "$root"; done
echo "$files" >"$root/.debs"
