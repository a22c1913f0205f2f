#!/usr/bin/env bash
# conformance.sh PROXIER...: Kubernetes' own e2e tests (e2e.test of
# k8s.io/kubernetes, built from Go modules) against real nodes, once per
# proxier (ours, upstream). The nodes, the proxier and CoreDNS run in the
# VM; e2e.test and kubectl run on this machine, and the apiserver reaches
# the nodes through e2e/tunnel. Results go to $KIP_CACHE/conformance/<proxier>/
# (junit_*.xml, e2e.log, vm.log), or conformance-<N>nodes/ with NODES=N.
#
#   NODES              1 (default): the real node of e2e/node and the
#                      [sig-network] Services tests; 2 or more: the nodes of
#                      e2e/multinode and upstream's IPVS kind-job selection
#                      (below), run by GINKGO_PROCS parallel workers
#   CONFORMANCE_FOCUS  ginkgo focus (default: as NODES says)
#   CONFORMANCE_SKIP   ginkgo skip (default: as NODES says)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${KIP_CACHE:?KIP_CACHE unset (run it through make conformance)}
nodes=${NODES:-1}
if [ "$nodes" -gt 1 ]; then
  # ci-kubernetes-kind-network-ipvs: FOCUS \[sig-network\]|\[Conformance\]
  # kept to [sig-network], its SKIP, and no [Feature:...] test (its label
  # filter); plus the webhook conformance tests, in which the apiserver
  # calls a webhook through its Service, which that job skips for IPVS.
  focus=${CONFORMANCE_FOCUS:-'\[sig-network\]|\[sig-api-machinery\] (AdmissionWebhook|CustomResourceConversionWebhook) .*\[Conformance\]'}
  skip=${CONFORMANCE_SKIP:-'Alpha|Beta|LoadBalancer|Disruptive|Flaky|Networking-IPv6|IPv6DualStack|LocalhostNodePorts|\[Serial\]|\[Feature:'}
  extra="regression-issue-74839 ginkgo" suffix=-${nodes}nodes testbin=bin/multinode-e2e.test mem=10240
  names=$(seq -s, -f 'kip-node-%g' 1 "$nodes")
else
  focus=${CONFORMANCE_FOCUS:-'\[sig-network\] Services '}
  skip=${CONFORMANCE_SKIP:-'\[Disruptive\]|\[Serial\]|\[Slow\]|\[Feature:|\[Flaky\]'}
  extra="" suffix="" testbin=bin/node-e2e.test mem=6144 names=""
fi
kbin=$(K8S_EXTRA_BINS="kubelet kube-controller-manager kube-scheduler e2e.test agnhost $extra" hack/k8s-bins.sh)
dir=$cache/node

# The image tags this release's e2e.test asks for (test/utils/image/manifest.go:
# agnhost 2.56 and pause 3.10.1 in v1.34, 2.66.1 and 3.10.2 in v1.37).
ver=${K8S_VERSION:?}
kdir=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
manifest=$kdir/test/utils/image/manifest.go
tag() { sed -n "s/.*configs\[$1\] = Config{[^\"]*\"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$manifest"; }
agnver=$(tag Agnhost); pausever=$(tag Pause)
[ -n "$agnver" ] && [ -n "$pausever" ] || { echo "conformance.sh: no agnhost or pause tag in $manifest" >&2; exit 2; }
# The framework's own pause tag, beside the node's sandbox image.
go run ./hack/image -static -packages "" -created 0 -tags "" -name registry.k8s.io/pause -version "$pausever" \
  -bin "$dir/bin/pause" -entrypoint /pause -o "$dir/images/pause-e2e.tar" >/dev/null

# The agnhost image, registry.k8s.io/e2e-test-images/agnhost:$agnver: the
# binary on a root of Debian packages with what the tests exec in their
# pods: sh, OpenBSD nc, curl, GNU wget, ss, dig and getent (the DNS tests'
# musl querier is agnhost), and every other busybox applet (seq, dd, date,
# tr, nslookup, ...), as upstream's Alpine-based image has them; CoreDNS as
# /coredns (a DNS test's server), porter's TLS key and certificate at /
# (its https ports), and pause as the default argument (a hostNetwork pod
# started with none), as upstream's Dockerfile has them.
# (busybox-static's wget crashed in hostNetwork pods, so wget is Debian's.)
# /bin is /usr/bin, as on a merged-/usr Debian: the tests run /bin/sleep.
agn=$dir/agnhost-root
top="dash netcat-openbsd curl wget iproute2 bind9-dnsutils libc-bin busybox-static"
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances --no-pre-depends $top 2>/dev/null | grep -v '^ ' | grep -v '^<' | sort -u)
hack/debs.sh "$dir/debs/agnhost" -x "$agn" $closure
install -m 0755 "$(ls "$dir"/bin/coredns-* | tail -1)" "$agn/coredns"
install -m 0644 "$kdir/test/images/agnhost/porter/localhost.crt" "$kdir/test/images/agnhost/porter/localhost.key" "$agn/"
echo "$closure" >"$dir/agnhost-packages"
programs="dash nc.openbsd curl wget ss dig getent busybox"
links="/bin=usr/bin,/usr/bin/sh=dash,/usr/bin/nc=nc.openbsd"
for a in $("$agn/bin/busybox" --list); do
  case " $programs sh nc " in *" $a "*) continue;; esac
  links="$links,/usr/bin/$a=busybox"
done
go run ./hack/image -static -root "$agn" -packages "$dir/agnhost-packages" -created 0 -tags "" \
  -programs "${programs// /,}" -links "$links" -files /coredns,/localhost.crt,/localhost.key -cmd pause \
  -name registry.k8s.io/e2e-test-images/agnhost -version "$agnver" -bin "$kbin/agnhost" -entrypoint /agnhost \
  -o "$dir/images/agnhost.tar" >/dev/null
[ "$nodes" -le 1 ] || hack/test-images.sh "$dir" "$manifest" "$kbin" >/dev/null

for p in "$@"; do
  out=$cache/conformance$suffix/$p
  rm -rf "$out" .vm/conformance && mkdir -p "$out"
  echo "== conformance: $p (logs in $out)"
  KBIN=$kbin KIP_NODE_PROXIER=$p KIP_CONFORMANCE_DIR=$PWD/.vm/conformance OUT=$out FOCUS=$focus SKIP=$skip \
  KIP_NODES=$nodes TESTBIN=$testbin MEM=$mem PROCS=${GINKGO_PROCS:-3} \
  KIP_VM_ENV="KBIN KIP_STATE KIP_CACHE KIP_IMAGE KIP_IMAGE_TAG KIP_NODE_PROXIER K8S_VERSION KIP_CONFORMANCE_DIR KIP_NODES" \
  bin/testcluster -controllers ${names:+-kubelets "$names"} -bin "$kbin" -state "$cache/run/conformance$suffix-$p" -- sh -c '
    hack/vm.sh run -m $MEM -t 10800 -f $KIP_APISERVER_PORT -p $KIP_TUNNEL_PORT:8132 -- $TESTBIN >"$OUT/vm.log" 2>&1 &
    vm=$!
    trap "kill $vm 2>/dev/null" EXIT
    until [ -f .vm/conformance/ready ]; do kill -0 $vm 2>/dev/null || { echo "the node did not come up (see $OUT/vm.log)"; exit 1; }; sleep 2; done
    rc=0
    if [ "$KIP_NODES" -gt 1 ]; then
      # --num-nodes as the kind e2e jobs pass it: without it the tests that
      # need two nodes (Networking Granular Checks) skip themselves.
      PATH=$KBIN:$PATH "$KBIN/ginkgo" --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --timeout=3h --no-color -v \
        "$KBIN/e2e.test" -- --kubeconfig="$KIP_STATE/admin-host.kubeconfig" --provider=local \
        --num-nodes="$KIP_NODES" --report-dir="$OUT" >"$OUT/e2e.log" 2>&1 || rc=$?
    else
      PATH=$KBIN:$PATH "$KBIN/e2e.test" --kubeconfig="$KIP_STATE/admin-host.kubeconfig" --provider=local \
        --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.timeout=3h --ginkgo.no-color --ginkgo.v \
        --report-dir="$OUT" >"$OUT/e2e.log" 2>&1 || rc=$?
    fi
    mkdir -p .vm/conformance && touch .vm/conformance/done; wait $vm || true
    grep -E "^(Ran|FAIL|SUCCESS)" "$OUT/e2e.log" | tail -3
    exit $rc' || { echo "conformance: $p had failures (see $out)"; failed=1; }
  cp -a .vm/artifacts "$out/node" 2>/dev/null || true
done
exit "${failed:-0}"
