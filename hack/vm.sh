#!/usr/bin/env bash
# vm.sh: run one command inside a throwaway QEMU VM booting Debian's stock
# kernel, which has IPVS, ipset, dummy, veth and netfilter as modules (the
# host kernel here has none of them). The VM's root is this machine's own /
# (9p, read-only, tmpfs overlay on top) and the current directory is shared
# read-write at the same path, so host-built binaries run there unchanged.
#
#   hack/vm.sh prepare                       fetch + unpack kernel, build initramfs (cached)
#   hack/vm.sh run [-m MiB] [-c CPUs] [-t secs] [-f PORT [-p HOST:GUEST]] -- CMD...
#       -f PORT  one user-mode NIC (restrict=on) whose only reachable address is
#                10.0.2.100, ports 6443 and PORT, forwarded to this machine's
#                127.0.0.1:PORT by bin/guestfwd (make e2e-bins).
#                Without -f the VM has no network card at all.
#       -p HOST:GUEST  with -f: this machine's 127.0.0.1:HOST reaches the VM's
#                10.0.2.15:GUEST (the apiserver's way to a real node, e2e/tunnel).
#
# KIP_KERNEL picks the kernel (docs/compatibility.md), each prepared and
# cached apart: unset, Debian bookworm's default (6.1); 6.12, bookworm's
# 6.12; 5.10, Debian bullseye's, from a private apt list of that suite.
#
# Exit code: CMD's; 124 on timeout; 125 if the VM reported none.
set -euo pipefail

kernel=${KIP_KERNEL:-}
case $kernel in ""|6.1|5.10|6.12) ;; *) echo "vm.sh: KIP_KERNEL=$kernel: want 6.1 (the default), 5.10 or 6.12" >&2; exit 2;; esac
[ "$kernel" = 6.1 ] && kernel=""
cache=${KIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-ipvs-proxy}/vm${kernel:+-$kernel}
mkdir -p "$cache"; cache=$(readlink -f "$cache")   # the VM sees real paths only

# Modules every test needs, loaded before CMD runs.
modules="ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_lblc ip_vs_lblcr ip_vs_sh ip_vs_dh ip_vs_sed ip_vs_nq ip_vs_mh
 dummy veth ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip ip_set_hash_ipportnet ip_set_hash_net
 ip_set_bitmap_port xt_set nf_conntrack nf_conntrack_netlink nf_nat iptable_nat iptable_filter iptable_mangle
 ip6table_nat ip6table_filter ip6table_mangle xt_MASQUERADE xt_mark xt_comment xt_addrtype xt_conntrack ipt_REJECT
 nf_reject_ipv4 xt_nat xt_physdev xt_ipvs nf_tables nft_compat nft_chain_nat br_netfilter sctp"

prepare() {
  for t in qemu-system-x86_64:qemu-system-x86 depmod:kmod cpio:cpio; do
    command -v "${t%%:*}" >/dev/null || { echo "vm.sh: missing ${t%%:*} (make deps installs ${t##*:})" >&2; exit 2; }
  done
  local kpkg=${KIP_KERNEL_PKG:-} meta=linux-image-amd64 apt=()
  case $kernel in
    6.12) meta=linux-image-6.12-amd64;;
    5.10) local opts; opts=$("$(dirname "$0")/apt-suite.sh" "$cache/apt" bullseye) || exit 2; mapfile -t apt <<<"$opts";;
  esac
  resolve() { apt-cache "${apt[@]}" depends "$meta" 2>/dev/null | sed -n 's/.*Depends: \(linux-image-[0-9].*\)/\1/p' | head -1; }
  if [ -z "$kpkg" ]; then
    kpkg=$(resolve)
    # A fresh machine may have no package lists yet.
    [ -n "$kpkg" ] || { apt-get "${apt[@]}" update -qq >/dev/null 2>&1 || true; kpkg=$(resolve); }
  fi
  [ -n "$kpkg" ] || { echo "vm.sh: cannot resolve the kernel package (run apt-get update)" >&2; exit 2; }
  if [ -f "$cache/kpkg" ] && [ "$(cat "$cache/kpkg")" = "$kpkg" ] && [ -f "$cache/initrd.gz" ]; then
    return 0
  fi
  echo "vm.sh: preparing $kpkg" >&2
  mkdir -p "$cache/debs"
  KIP_APT_OPTS="${apt[*]}" "$(dirname "$0")/debs.sh" "$cache/debs" "$kpkg"
  "$(dirname "$0")/debs.sh" "$cache/debs" busybox-static
  rm -rf "$cache/kernel" "$cache/bb"; mkdir -p "$cache/kernel" "$cache/bb"
  dpkg-deb -x "$cache/debs/$kpkg"_*.deb "$cache/kernel"
  dpkg-deb -x "$cache"/debs/busybox-static_*.deb "$cache/bb"
  local kver; kver=$(ls "$cache/kernel/lib/modules")
  depmod -b "$cache/kernel" "$kver"
  cp "$cache/kernel/boot/vmlinuz-$kver" "$cache/vmlinuz"

  # The initramfs holds busybox and the modules needed to mount the 9p root.
  local ir; ir=$(mktemp -d)
  mkdir -p "$ir"/{bin,dev,proc,sys,newroot,lower,upper,mods}
  cp "$cache/bb/bin/busybox" "$ir/bin/"
  local m f seen=""
  for m in virtio_pci 9pnet_virtio 9p overlay; do
    for f in $(modprobe -d "$cache/kernel" -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}'); do
      case " $seen " in *" $f "*) ;; *) seen="$seen $f"
        # busybox's insmod takes no compressed module (6.12's are .ko.xz).
        local ko; ko=$(basename "${f%.xz}")
        case $f in *.xz) xz -dc "$f" >"$ir/mods/$ko";; *) cp "$f" "$ir/mods/$ko";; esac
        echo "$ko" >>"$ir/mods/order";; esac
    done
  done
  cat >"$ir/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m; done
arg() { for w in $(cat /proc/cmdline); do case $w in $1=*) echo "${w#*=}";; esac; done; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower
mount -t tmpfs -o size=80% tmpfs /upper; mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot
work=$(arg kipwork); kmods=$(arg kipkmods)
mkdir -p /newroot$work /newroot/lib/modules
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work /newroot$work
mount --bind /lower$kmods /newroot/lib/modules
umount /proc /sys /dev
exec switch_root /newroot /bin/sh $work/.vm/boot.sh
INIT
  chmod +x "$ir/init"
  (cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) >"$cache/initrd.gz"
  rm -rf "$ir"
  echo "$kver" >"$cache/kver"; echo "$kpkg" >"$cache/kpkg"
  echo "vm.sh: kernel $kver ready in $cache" >&2
}

run() {
  local mem=3072 cpus=${KIP_VM_CPUS:-$(nproc)} tmo=3000 fwd="" hostfwd=""
  while [ $# -gt 0 ]; do case $1 in
    -m) mem=$2; shift 2;; -c) cpus=$2; shift 2;; -t) tmo=$2; shift 2;; -f) fwd=$2; shift 2;;
    -p) hostfwd=",hostfwd=tcp:127.0.0.1:${2%%:*}-10.0.2.15:${2##*:}"; shift 2;;
    --) shift; break;; *) break;; esac; done
  [ $# -gt 0 ] || { echo "usage: vm.sh run [-m MiB] [-c CPUs] [-t secs] [-f PORT [-p HOST:GUEST]] -- CMD..." >&2; exit 2; }
  prepare
  local accel cpu # before .vm/ is written: probing KVM runs a VM of its own
  read -r accel cpu < <(pick_accel)
  local nic=(-nic none) netup=":"
  if [ -n "$fwd" ]; then
    # bin/guestfwd (make e2e-bins) carries each guest connection to the host
    # port; see e2e/guestfwd for why not socat. QEMU options escape "," as ",,".
    local gf="$PWD/bin/guestfwd"
    [ -x "$gf" ] || { echo "vm.sh: missing $gf (make e2e-bins)" >&2; exit 2; }
    # 10.0.2.100:PORT too: the kubernetes Service's endpoint (testcluster -controllers).
    local to="-cmd:${gf//,/,,} 127.0.0.1:$fwd"
    nic=(-netdev "user,id=n0,restrict=on,net=10.0.2.0/24,guestfwd=tcp:10.0.2.100:6443$to,guestfwd=tcp:10.0.2.100:$fwd$to$hostfwd"
         -device virtio-net-pci,netdev=n0)
    # quickack: QEMU sends towards the guest with Nagle's algorithm too, and
    # the guest's delayed ACKs held back every watch event of two segments.
    netup="modprobe virtio_net; ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0; ip route replace 10.0.2.0/24 dev eth0 src 10.0.2.15 quickack 1"
  fi
  local work=$PWD kver; kver=$(cat "$cache/kver")
  local st="$work/.vm"; rm -rf "$st"; mkdir -p "$st"
  printf '%q ' "$@" >"$st/cmd"
  cat >"$st/boot.sh" <<EOF
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm /run/netns /tmp
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
hostname kip-node
ip link set lo up
$netup
for m in $(echo $modules); do modprobe \$m 2>/dev/null || echo "vm: cannot load \$m"; done
cd $(printf %q "$work")
export HOME=/root PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin KIP_IN_VM=1
$(for v in ${KIP_VM_ENV:-}; do printf 'export %s=%q\n' "$v" "${!v:-}"; done)
sh $(printf %q "$st/cmd") </dev/null >/dev/console 2>&1
echo "\$?" >$(printf %q "$st/rc")
sync; echo b >/proc/sysrq-trigger
EOF
  # Under emulation the guest picks the emulated HPET as its clock, which
  # every clock_gettime reads through a system call and an MMIO exit under
  # QEMU's global lock (~1.2 us per time.Now, 13% of a proxier's CPU at 50k,
  # and the two vCPUs serialised on it). The TSC QEMU emulates is the host's,
  # read in user space (~0.18 us), as on real nodes. KIP_VM_CLOCK= keeps HPET.
  local clock="${KIP_VM_CLOCK-clocksource=tsc tsc=reliable}"
  [ "$accel" = tcg ] || clock=
  local rc=0
  timeout --foreground "$tmo" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -smp "$cpus" -m "$mem" \
    -nographic -no-reboot "${nic[@]}" \
    -kernel "$cache/vmlinuz" -initrd "$cache/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 $clock kipwork=$work kipkmods=$cache/kernel/lib/modules" \
    -fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
    -fsdev local,id=w,path="$work",security_model=none,multidevs=remap -device virtio-9p-pci,fsdev=w,mount_tag=work \
    </dev/null || rc=$?
  if [ "$rc" -eq 124 ]; then echo "vm.sh: timed out after ${tmo}s" >&2; exit 124; fi
  [ -f "$st/rc" ] || { echo "vm.sh: the VM gave no exit code" >&2; exit 125; }
  exit "$(cat "$st/rc")"
}

# pick_accel prints "ACCEL CPU" for QEMU: KVM when /dev/kvm works, else TCG.
# A writable /dev/kvm is not enough: under some nested hypervisors QEMU
# aborts setting MSR 0x10a (IA32_ARCH_CAPABILITIES) with -cpu host, and under
# others the guest hangs early in boot. So the first run after each host
# boot tries KVM with a VM that runs `true`, and remembers what worked.
# KIP_VM_ACCEL=tcg (or kvm) skips the probe.
pick_accel() {
  case ${KIP_VM_ACCEL:-} in
    tcg) echo "tcg max"; return;; kvm) echo "kvm ${KIP_VM_CPU:-host}"; return;; esac
  if [ ! -w /dev/kvm ]; then echo "tcg max"; return; fi
  local memo; memo="$cache/accel.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)"
  if [ ! -s "$memo" ]; then
    local pick="tcg max" c
    for c in host host,-arch-capabilities; do
      if (KIP_VM_ACCEL=kvm KIP_VM_CPU=$c run -m 512 -t 30 -- true) >/dev/null 2>&1; then pick="kvm $c"; break; fi
    done
    echo "vm.sh: /dev/kvm is there; using ${pick% *} (-cpu ${pick#* })" >&2
    echo "$pick" >"$memo"
  fi
  cat "$memo"
}

case ${1:-} in
  prepare) prepare;;
  run) shift; run "$@";;
  *) echo "usage: vm.sh prepare | run [-m MiB] [-c CPUs] [-t secs] [-f PORT [-p HOST:GUEST]] -- CMD..." >&2; exit 2;;
esac
