#!/usr/bin/env bash
# test-images.sh DIR MANIFEST KBIN: the images beside agnhost and pause that
# the multi-node selection of hack/conformance.sh pulls, built offline from
# Debian packages (downloaded, not installed) and named with the tags of the
# release's test/utils/image/manifest.go, into DIR/images-multinode/:
#   busybox               busybox-static, every applet linked
#   glibc-dns-testing     dig, nslookup and host (bind9-dnsutils), getent, a
#                         shell and busybox: the DNS tests' querier
#   distroless-iptables   conntrack, a shell and busybox (the CLOSE_WAIT test)
#   nginx                 Debian's nginx-light serving on :80
#   regression-issue-74839  built from k8s.io/kubernetes (KBIN, k8s-bins.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: test-images.sh DIR MANIFEST KBIN}; manifest=${2:?}; kbin=${3:?}
out=$dir/images-multinode
mkdir -p "$out"
tag() { sed -n "s/.*configs\[$1\] = Config{[^\"]*\"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$manifest"; }

# closure PACKAGE...: the packages and everything they depend on.
closure() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances --no-pre-depends "$@" 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u
}

# image KEY REPOSITORY TOP-PACKAGES PROGRAMS LINKS BIN ENTRYPOINT [FILES]: the
# image the manifest calls KEY, REPOSITORY:its tag (the manifest's registry
# for KEY), on the unpacked closure of TOP-PACKAGES,
# after $prepare (if set) has written files into that root; a BIN of
# "root:PATH" is PATH in that root.
image() {
  local key=$1 repo=$2 top=$3 programs=$4 links=$5 bin=$6 entry=$7 files=${8:-} ver pkgs="" root name=${2##*/}
  ver=$(tag "$key")
  [ -n "$ver" ] || { echo "test-images.sh: no tag for $key in $manifest" >&2; exit 2; }
  root=$dir/roots/$name
  [ -z "$top" ] || pkgs=$(closure $top)
  hack/debs.sh "$dir/debs/test-images" -x "$root" $pkgs
  echo "$pkgs" >"$dir/roots/$name.packages"
  [ -z "${prepare:-}" ] || "$prepare" "$root"
  go run ./hack/image -static -root "$root" -packages "$dir/roots/$name.packages" -created 0 -tags "" \
    -programs "$programs" -links "$links" -files "$files" \
    -name "$repo" -version "$ver" -bin "${bin/#root:/$root}" -entrypoint "$entry" \
    -o "$out/$name.tar" >/dev/null
}

# busybox's applets, each a link to it in /usr/bin (/bin is /usr/bin).
applets() {
  local l="/bin=usr/bin" a
  for a in $("$1/bin/busybox" --list); do [ "$a" = busybox ] || l="$l,/usr/bin/$a=busybox"; done
  echo "$l"
}

mkdir -p "$dir/roots"
hack/debs.sh "$dir/debs/test-images" -x "$dir/roots/busybox-only" busybox-static
bb=$(applets "$dir/roots/busybox-only")

prepare="" image BusyBox registry.k8s.io/e2e-test-images/busybox "busybox-static" "" "$bb" root:/bin/busybox /usr/bin/busybox

# Shell, getent and dig are Debian's; the rest busybox's. Hosts come from
# /etc/hosts first, as on Debian.
dnsfiles() { printf 'hosts: files dns\n' >"$1/etc/nsswitch.conf"; }
prepare=dnsfiles image GlibcDnsTesting registry.k8s.io/e2e-test-images/glibc-dns-testing "dash bind9-dnsutils libc-bin busybox-static" dash,dig,nslookup,host,getent \
  "${bb/,\/usr\/bin\/sh=busybox/},/usr/bin/sh=dash" root:/bin/busybox /usr/bin/busybox /etc/nsswitch.conf

prepare="" image DistrolessIptables registry.k8s.io/build-image/distroless-iptables "dash conntrack busybox-static" dash,conntrack \
  "${bb/,\/usr\/bin\/sh=busybox/},/usr/bin/sh=dash" root:/bin/busybox /usr/bin/busybox

# nginx in the foreground on :80, as the image's CMD runs it; its scratch
# files go to /dev/shm, the one writable directory every container has.
nginxconf() {
  mkdir -p "$1/etc/nginx" "$1/usr/share/nginx/html"
  cat >"$1/etc/nginx/nginx.conf" <<'EOF'
daemon off;
user root;
worker_processes 1;
pid /dev/shm/nginx.pid;
error_log stderr;
events {}
http {
  access_log off;
  client_body_temp_path /dev/shm/client_body;
  proxy_temp_path /dev/shm/proxy;
  fastcgi_temp_path /dev/shm/fastcgi;
  uwsgi_temp_path /dev/shm/uwsgi;
  scgi_temp_path /dev/shm/scgi;
  server { listen 80; root /usr/share/nginx/html; }
}
EOF
  echo ok >"$1/usr/share/nginx/html/index.html"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$1/etc/passwd"
  printf 'root:x:0:\n' >"$1/etc/group"
}
# -bin is copied as it is, so the program (with its libraries) is nginx.
prepare=nginxconf image Nginx registry.k8s.io/e2e-test-images/nginx "nginx-light" nginx "" root:/usr/sbin/nginx /usr/sbin/nginx \
  /etc/nginx/nginx.conf,/usr/share/nginx/html/index.html,/etc/passwd,/etc/group

prepare="" image RegressionIssue74839 registry.k8s.io/e2e-test-images/regression-issue-74839 "" "" "" "$kbin/regression-issue-74839" /regression-issue-74839
echo "$out"
