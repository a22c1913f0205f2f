#!/usr/bin/env bash
# deps.sh: install the Debian packages the VM tests need, if any is missing.
set -euo pipefail
pkgs="qemu-system-x86 kmod cpio xz-utils iptables nftables ipset ipvsadm conntrack iproute2 busybox-static curl"
missing=""
for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null
