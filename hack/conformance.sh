#!/usr/bin/env bash
# conformance.sh PROXIER...: Kubernetes' own [sig-network] Services e2e tests
# (e2e.test of k8s.io/kubernetes, built from Go modules) against the real
# node of e2e/node, once per proxier (ours, upstream). The node, the proxier
# and CoreDNS run in the VM; e2e.test and kubectl run on this machine, and
# the apiserver reaches the node through e2e/tunnel. Results go to
# $KIP_CACHE/conformance/<proxier>/ (junit_01.xml, e2e.log, vm.log).
#
#   CONFORMANCE_FOCUS  ginkgo focus (default: every Services test)
#   CONFORMANCE_SKIP   ginkgo skip (default: Disruptive, Serial, Slow, Feature, Flaky)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${KIP_CACHE:?KIP_CACHE unset (run it through make conformance)}
focus=${CONFORMANCE_FOCUS:-'\[sig-network\] Services '}
skip=${CONFORMANCE_SKIP:-'\[Disruptive\]|\[Serial\]|\[Slow\]|\[Feature:|\[Flaky\]'}
kbin=$(K8S_EXTRA_BINS="kubelet kube-controller-manager kube-scheduler e2e.test agnhost" hack/k8s-bins.sh)
dir=$cache/node

# The image tags this release's e2e.test asks for (test/utils/image/manifest.go:
# agnhost 2.56 and pause 3.10.1 in v1.34, 2.66.1 and 3.10.2 in v1.37).
ver=${K8S_VERSION:?}
manifest=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/test/utils/image/manifest.go
tag() { sed -n "s/.*configs\[$1\] = Config{[^\"]*\"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$manifest"; }
agnver=$(tag Agnhost); pausever=$(tag Pause)
[ -n "$agnver" ] && [ -n "$pausever" ] || { echo "conformance.sh: no agnhost or pause tag in $manifest" >&2; exit 2; }
# The framework's own pause tag, beside the node's sandbox image.
go run ./hack/image -static -packages "" -created 0 -tags "" -name registry.k8s.io/pause -version "$pausever" \
  -bin "$dir/bin/pause" -entrypoint /pause -o "$dir/images/pause-e2e.tar" >/dev/null

# The agnhost image, registry.k8s.io/e2e-test-images/agnhost:$agnver: the
# binary on a root of Debian packages with what the tests exec in their
# pods: sh, OpenBSD nc, curl, GNU wget, ss, and busybox for seq, dd,
# nslookup and the small tools. (busybox-static's wget crashed in
# hostNetwork pods, so wget is Debian's.) /bin is /usr/bin, as on a
# merged-/usr Debian: the tests run /bin/sleep and /bin/false.
agn=$dir/agnhost-root
top="dash netcat-openbsd curl wget iproute2 busybox-static"
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances --no-pre-depends $top 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u)
hack/debs.sh "$dir/debs/agnhost" -x "$agn" $closure
echo "$closure" >"$dir/agnhost-packages"
applets="seq dd nslookup sleep false true cat tail grep head ls ps mkdir rm env hostname"
links="/bin=usr/bin,/usr/bin/sh=dash,/usr/bin/nc=nc.openbsd"
for a in $applets; do links="$links,/usr/bin/$a=busybox"; done
go run ./hack/image -static -root "$agn" -packages "$dir/agnhost-packages" -created 0 -tags "" \
  -programs dash,nc.openbsd,curl,wget,ss,busybox -links "$links" \
  -name registry.k8s.io/e2e-test-images/agnhost -version "$agnver" -bin "$kbin/agnhost" -entrypoint /agnhost \
  -o "$dir/images/agnhost.tar" >/dev/null

for p in "$@"; do
  out=$cache/conformance/$p
  rm -rf "$out" .vm/conformance && mkdir -p "$out"
  echo "== conformance: $p (logs in $out)"
  KBIN=$kbin KIP_NODE_PROXIER=$p KIP_CONFORMANCE_DIR=$PWD/.vm/conformance OUT=$out FOCUS=$focus SKIP=$skip \
  KIP_VM_ENV="KBIN KIP_STATE KIP_CACHE KIP_IMAGE KIP_IMAGE_TAG KIP_NODE_PROXIER K8S_VERSION KIP_CONFORMANCE_DIR" \
  bin/testcluster -controllers -bin "$kbin" -state "$cache/run/conformance-$p" -- sh -c '
    hack/vm.sh run -m 6144 -t 10800 -f $KIP_APISERVER_PORT -p $KIP_TUNNEL_PORT:8132 -- bin/node-e2e.test >"$OUT/vm.log" 2>&1 &
    vm=$!
    trap "kill $vm 2>/dev/null" EXIT
    until [ -f .vm/conformance/ready ]; do kill -0 $vm 2>/dev/null || { echo "the node did not come up (see $OUT/vm.log)"; exit 1; }; sleep 2; done
    rc=0
    PATH=$KBIN:$PATH "$KBIN/e2e.test" --kubeconfig="$KIP_STATE/admin-host.kubeconfig" --provider=local \
      --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.timeout=3h --ginkgo.no-color --ginkgo.v \
      --report-dir="$OUT" >"$OUT/e2e.log" 2>&1 || rc=$?
    mkdir -p .vm/conformance && touch .vm/conformance/done; wait $vm || true
    grep -E "^(Ran|FAIL|SUCCESS)" "$OUT/e2e.log" | tail -3
    exit $rc' || { echo "conformance: $p had failures (see $out)"; failed=1; }
  cp -a .vm/artifacts "$out/node" 2>/dev/null || true
done
exit "${failed:-0}"
