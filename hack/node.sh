#!/usr/bin/env bash
# node.sh: what the real node of e2e/node needs, into the cache; prints the
# directory. containerd, runc and the CNI plugins come from Debian packages
# (downloaded and unpacked, not installed); kubelet, kube-controller-manager
# and kube-scheduler from Go modules (k8s-bins.sh); CoreDNS from its Go
# module. The images are built offline with hack/image, named as a cluster
# expects them, so no pod ever pulls:
#   registry.k8s.io/pause:3.10                 e2e/pause
#   localhost/echo:dev                         e2e/echo, the test server
#   registry.k8s.io/coredns/coredns:v1.12.1    CoreDNS
#   registry.k8s.io/kube-proxy:v$K8S_VERSION   upstream kube-proxy on the files
#                                              of our image (make image first)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${KIP_CACHE:?KIP_CACHE unset (run it through make)}
ver=${K8S_VERSION:-1.37.2}
corednsver=1.12.1
dir=$cache/node
mkdir -p "$dir/debs" "$dir/images" "$dir/bin"

hack/debs.sh "$dir/debs" -x "$dir/root" containerd runc containernetworking-plugins

kbin=$(K8S_EXTRA_BINS="kubelet kube-controller-manager kube-scheduler" hack/k8s-bins.sh)

export GOWORK=off CGO_ENABLED=0
if [ ! -x "$dir/bin/coredns-$corednsver" ]; then
  echo "node.sh: building CoreDNS v$corednsver (first time only, a few minutes)" >&2
  w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
  (cd "$w" && go mod init kipcoredns && GOFLAGS=-mod=mod go get "github.com/coredns/coredns@v$corednsver" \
    && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dir/bin/coredns.tmp" github.com/coredns/coredns) \
    >"$w/log" 2>&1 || { cat "$w/log" >&2; echo "node.sh: the CoreDNS build failed" >&2; exit 1; }
  mv "$dir/bin/coredns.tmp" "$dir/bin/coredns-$corednsver"
fi
go build -trimpath -ldflags "-s -w" -o "$dir/bin/pause" ./e2e/pause
go build -trimpath -ldflags "-s -w" -o "$dir/bin/echo" ./e2e/echo

created=$(git log -1 --format=%ct 2>/dev/null || date +%s)
img() { go run ./hack/image -created "$created" -tags "" "$@" >/dev/null; }
img -static -packages "" -name registry.k8s.io/pause -version 3.10 -bin "$dir/bin/pause" -entrypoint /pause -o "$dir/images/pause.tar"
img -static -packages "" -name localhost/echo -version dev -bin "$dir/bin/echo" -entrypoint /echo -o "$dir/images/echo.tar"
img -static -packages "" -name registry.k8s.io/coredns/coredns -version "v$corednsver" -bin "$dir/bin/coredns-$corednsver" \
  -entrypoint /coredns -o "$dir/images/coredns.tar"
# Upstream kube-proxy: our image's packages, plus ipset, which its IPVS mode
# runs, and the /etc/protocols ipset reads; the plain iptables names are
# nft's, the backend of the VM's kubelet.
[ -d "$cache/image/root" ] || { echo "node.sh: no $cache/image/root (make image first)" >&2; exit 2; }
kpdebs="ipset libipset13 netbase"
hack/debs.sh "$dir/debs" $kpdebs
rm -rf "$dir/kube-proxy-root" && cp -a "$cache/image/root" "$dir/kube-proxy-root"
for p in $kpdebs; do dpkg-deb -x "$(ls "$dir/debs/${p}"_*.deb | tail -1)" "$dir/kube-proxy-root"; done
{ cat hack/image/packages; for p in $kpdebs; do echo "$p"; done; } >"$dir/kube-proxy-packages"
img -root "$dir/kube-proxy-root" -packages "$dir/kube-proxy-packages" -iptables nft -programs ipset -files /etc/protocols \
  -name registry.k8s.io/kube-proxy -version "v$ver" -bin "$kbin/kube-proxy" -entrypoint /usr/local/bin/kube-proxy \
  -o "$dir/images/kube-proxy.tar"
echo "$dir"
