#!/usr/bin/env bash
# k8s-bins.sh: build kube-apiserver, kube-proxy (the oracle), kubectl and etcd
# from Go modules (no prebuilt downloads are possible here) into a cache
# directory keyed by version, and print that directory. K8S_EXTRA_BINS names
# more commands of k8s.io/kubernetes/cmd (the real node's kubelet,
# kube-controller-manager and kube-scheduler; e2e.test, agnhost and
# regression-issue-74839, test programs of make conformance, and ginkgo).
#
# The binaries build in a throwaway module that requires k8s.io/kubernetes
# (hack/k8s-module.sh).
set -euo pipefail
. "$(dirname "$0")/k8s-module.sh"
ver=${K8S_VERSION:-1.37.2}
etcdver=${ETCD_VERSION:-3.6.6}
out=${KIP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-ipvs-proxy}/k8s/v$ver-etcd$etcdver
mkdir -p "$out"
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0

need=""
for b in kube-apiserver kube-proxy kubectl etcd ${K8S_EXTRA_BINS:-}; do [ -x "$out/$b" ] || need="$need $b"; done
if [ -z "$need" ]; then echo "$out"; exit 0; fi

w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
minor=$(cut -d. -f2 <<<"$ver"); patch=$(cut -d. -f3 <<<"$ver")
ld="-s -w -X k8s.io/component-base/version.gitVersion=v$ver -X k8s.io/component-base/version.gitMajor=1
 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean
 -X k8s.io/client-go/pkg/version.gitVersion=v$ver"
for b in $need; do
  case $b in
  etcd)
    echo "k8s-bins: building etcd v$etcdver (first time only, a few minutes)" >&2
    mkdir -p "$w/etcd" && cd "$w/etcd"
    go mod init kipetcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@v$etcdver" >/dev/null 2>&1
    go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$out/etcd.tmp" "$out/etcd"
    ;;
  *)
    echo "k8s-bins: building $b v$ver (first time only, a few minutes)" >&2
    [ -f "$w/k8s/go.mod" ] || k8s_module "$w/k8s" "$ver"
    cd "$w/k8s"
    # e2e.test is test/e2e's test binary, agnhost the e2e tests' server.
    pkg=k8s.io/kubernetes/cmd/$b
    # ginkgo, the runner of e2e.test's parallel workers, at the release's version.
    case $b in e2e.test) pkg=k8s.io/kubernetes/test/e2e;; agnhost|regression-issue-74839) pkg=k8s.io/kubernetes/test/images/$b;;
      ginkgo) pkg=github.com/onsi/ginkgo/v2/ginkgo;; esac
    printf '//go:build tools\npackage tools\nimport _ "%s"\n' "$pkg" >tools.go
    go mod tidy >/dev/null 2>&1 || go get "$pkg@v$ver" >/dev/null
    if [ "$b" = e2e.test ]; then
      go test -c -trimpath -ldflags "$(echo $ld)" -o "$out/$b.tmp" "$pkg"
    else
      go build -trimpath -ldflags "$(echo $ld)" -o "$out/$b.tmp" "$pkg"
    fi
    mv "$out/$b.tmp" "$out/$b"
    ;;
  esac
done
echo "$out"
