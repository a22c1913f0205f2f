#!/usr/bin/env bash
# apt-suite.sh DIR SUITE [ARCH]: print, one per line, the apt options that
# read the package lists of a Debian suite (and architecture, default the
# machine's) kept in DIR: its sources are the machine's own Debian mirrors
# (from /etc/apt) with the suite's name. The lists are fetched once.
set -euo pipefail
d=${1:?usage: apt-suite.sh DIR SUITE [ARCH]}; suite=${2:?usage: apt-suite.sh DIR SUITE [ARCH]}; arch=${3:-}
mkdir -p "$d/lists/partial" "$d/parts" "$d/cache"
# Each deb822 stanza (a paragraph) of debian.sources is one record; the
# main archive is the one listing the bare release, the security one its
# -security suite.
src=$(awk -v RS= -v s="$suite" -v a="${arch:+arch=$arch }" '
  { uri = ""; main = 0; sec = 0
    n = split($0, l, "\n")
    for (i = 1; i <= n; i++) {
      if (l[i] ~ /^URIs:/) { split(l[i], f, /[ \t]+/); uri = f[2] }
      if (l[i] ~ /^Suites:/) { m = split(l[i], f, /[ \t]+/); for (j = 2; j <= m; j++) { if (f[j] ~ /-security$/) sec = 1; else if (f[j] !~ /-/) main = 1 } }
    }
    if (uri == "") next
    if (main && mainuri == "") mainuri = uri
    if (sec && securi == "") securi = uri }
  END { if (mainuri != "") print "deb [" a "signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " mainuri " " s " main";
        if (securi != "") print "deb [" a "signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " securi " " s "-security main" }' \
  /etc/apt/sources.list.d/debian.sources 2>/dev/null)
[ -n "$src" ] || { echo "apt-suite.sh: no Debian mirror in /etc/apt/sources.list.d to read $suite from" >&2; exit 2; }
echo "$src" >"$d/sources.list"
opts=(-o APT::Sandbox::User=root -o "Dir::Etc::SourceList=$d/sources.list" -o "Dir::Etc::SourceParts=$d/parts"
  -o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache")
[ -z "$arch" ] || opts+=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
[ -n "$(ls "$d/lists" 2>/dev/null | grep -v partial)" ] || apt-get "${opts[@]}" update -qq >/dev/null
printf '%s\n' "${opts[@]}"
