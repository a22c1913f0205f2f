# kube-ipvs-proxy. `make demo` and `make test` set up everything they need:
# Debian packages (hack/deps.sh), kube-apiserver/etcd/kube-proxy built from Go
# modules (hack/k8s-bins.sh) and the VM kernel (hack/vm.sh), all cached in
# $(CACHE), outside the checkout.
CACHE      ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kube-ipvs-proxy
K8S_VERSION ?= 1.37.2
GO         ?= go
BIN        := bin
# The version --version, the log's first line and the image carry.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
export KIP_CACHE := $(CACHE)
export K8S_VERSION

.PHONY: all build image test unit e2e node-e2e multinode-e2e conformance matrix check-monitoring check-chart release demo bench bench-quick bench-seed bench-baseline deps k8s-bins vm-kernel lint clean fuzz

all: build

build:
	$(GO) build -ldflags "-X main.buildVersion=$(VERSION)" -o $(BIN)/kube-ipvs-proxy .

# The container image, as an OCI archive in $(CACHE)/image (docs/deploying.md).
image:
	hack/image.sh $(VERSION)

# Host-side helpers and the e2e test binary, which runs inside the VM.
e2e-bins: build
	$(GO) build -o $(BIN)/testcluster ./e2e/testcluster
	$(GO) build -o $(BIN)/echo ./e2e/echo
	$(GO) build -o $(BIN)/demo ./e2e/demo
	$(GO) build -o $(BIN)/guestfwd ./e2e/guestfwd
	$(GO) build -o $(BIN)/tunnel ./e2e/tunnel
	$(GO) build -o $(BIN)/bench ./bench
	$(GO) test -c -tags e2e -o $(BIN)/e2e.test ./e2e

deps:
	hack/deps.sh

k8s-bins: deps
	hack/k8s-bins.sh >/dev/null

vm-kernel: deps
	hack/vm.sh prepare

# staticcheck, pinned, built into the cache on first use.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK = $(CACHE)/tools/staticcheck-$(STATICCHECK_VERSION)
$(STATICCHECK):
	mkdir -p $(CACHE)/tools/bin && GOBIN=$(CACHE)/tools/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(CACHE)/tools/bin/staticcheck $@

lint: $(STATICCHECK)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags e2e ./e2e/...

# promtool, pinned, checks the alerts of deploy/monitoring (the
# PrometheusRule's spec is a rules file, indented). A release check, not
# make test's: its first build takes 10 to 25 minutes here. (make unit
# checks that every query names a metric we serve.)
PROMTOOL_VERSION ?= v0.316.0
PROMTOOL = $(CACHE)/tools/promtool-$(PROMTOOL_VERSION)/promtool
$(PROMTOOL):
	mkdir -p $(dir $@) && GOBIN=$(dir $@) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

# Helm, pinned and built from its module with the Kubernetes version its
# own release sets (helm template checks the chart's kubeVersion against
# it). The chart's checks and node-e2e's chart run use it.
HELM_VERSION ?= v3.22.0
HELM_K8S_MINOR ?= 37
HELM = $(CACHE)/tools/helm-$(HELM_VERSION)/helm
$(HELM):
	mkdir -p $(dir $@) && GOBIN=$(dir $@) $(GO) install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
	  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)" \
	  helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# A release (docs/releasing.md): VERSION (a semantic version, the commit's
# tag) as a multi-arch image archive (linux/amd64, linux/arm64), deploy/
# rendered at that tag and the chart packaged, in $(CACHE)/release/VERSION/,
# after the unit tests pass for arm64 under qemu-user.
release: k8s-bins $(HELM)
	HELM=$(HELM) hack/release.sh $(VERSION)

# The chart: helm lint, every toggle rendered, the rendered alerts checked
# by promtool with kube-proxy's job name. A release check.
CHART_ALL = --set apiServer=https://10.0.0.1:6443 --set kubeProxyLabels=true --set monitoring.podMonitor.enabled=true \
	--set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true
check-chart: $(HELM) $(PROMTOOL)
	@mkdir -p $(CACHE)/tools; rc=0; $(HELM) lint --strict charts/kube-ipvs-proxy $(CHART_ALL) >$(CACHE)/tools/chart-lint.log 2>&1 || rc=$$?; \
	  grep -v 'found symbolic link' $(CACHE)/tools/chart-lint.log; exit $$rc
	@$(HELM) template kube-ipvs-proxy charts/kube-ipvs-proxy -n kube-system $(CHART_ALL) 2>/dev/null >$(CACHE)/tools/chart.yaml
	@grep -c '^kind: \(DaemonSet\|ConfigMap\|ServiceAccount\|ClusterRoleBinding\|PodMonitor\|Service\|ServiceMonitor\|PrometheusRule\)$$' $(CACHE)/tools/chart.yaml | grep -qx 9 || { echo "check-chart: the chart did not render its 9 objects"; exit 1; }
	@! $(HELM) template kube-ipvs-proxy charts/kube-ipvs-proxy >/dev/null 2>&1 || { echo "check-chart: rendered without apiServer"; exit 1; }
	$(HELM) template kube-ipvs-proxy charts/kube-ipvs-proxy $(CHART_ALL) --show-only templates/monitoring.yaml --set monitoring.podMonitor.enabled=false \
	  --set monitoring.serviceMonitor.enabled=false --set monitoring.dashboard.enabled=false 2>/dev/null \
	  | sed -n '/^spec:/,$$p' | sed '1d; s/^  //' >$(CACHE)/tools/chart-rules.yaml
	@grep -q 'job="kube-proxy"' $(CACHE)/tools/chart-rules.yaml || { echo "check-chart: the alerts do not follow kubeProxyLabels"; exit 1; }
	$(PROMTOOL) check rules $(CACHE)/tools/chart-rules.yaml

check-monitoring: $(PROMTOOL)
	@mkdir -p $(CACHE)/tools && sed -n '/^spec:/,$$p' deploy/monitoring/prometheusrule.yaml | sed '1d; s/^  //' >$(CACHE)/tools/rules.yaml
	$(PROMTOOL) check rules $(CACHE)/tools/rules.yaml

# Every fuzz target, as package:target. Go fuzzes one target per run.
FUZZ_TARGETS := ./desired:FuzzDesiredState ./proxier:FuzzChangeTracker ./desired:FuzzAPIAddr \
	./glue:FuzzSavedBlocked ./glue:FuzzOurChains ./informers:FuzzSlim ./ipvs:FuzzDecode ./ipset:FuzzEntryCodec ./ipset:FuzzHeader
fuzz_each = @for t in $(FUZZ_TARGETS); do \
	  $(GO) test -run='^$$' -fuzz="^$${t\#*:}\$$" -fuzztime=$(1) $${t%%:*} || exit 1; done

# The fuzz budget is a count, not a time: Go 1.26's fuzzer can fail a run whose
# -fuzztime duration ends while a worker is busy (go.dev/issue/75804).
UNIT_FUZZTIME ?= 3000x
unit: lint deps
	$(GO) test -race -count=1 ./...
	$(call fuzz_each,$(UNIT_FUZZTIME))

# Every fuzz target for longer (FUZZTIME each, executions or a duration such
# as 5m); the corpus lives in Go's cache, a failing input in the package's
# testdata/fuzz (commit it with the fix).
FUZZTIME ?= 1000000x
fuzz:
	$(call fuzz_each,$(FUZZTIME))

# The real-kernel suite: etcd + kube-apiserver on this machine's loopback, the
# proxier and the tests inside a QEMU VM booting Debian's stock kernel. The
# image's proxier runs there too (TestImageProgramsTheNode).
# E2E_MINUTES bounds the suite: it takes 23-36 minutes on 6.1 under emulation,
# depending on the machine's day; 50 leaves .ci/run (with node-e2e and
# conformance) inside CI's 90 minutes. 5.10 needs ~60 (docs/compatibility.md).
E2E_MINUTES ?= 50
e2e: e2e-bins k8s-bins vm-kernel image
	KBIN=$$(hack/k8s-bins.sh) KIP_IMAGE=$(CACHE)/image/kube-ipvs-proxy.tar \
	  KIP_VM_ENV="KBIN KIP_STATE KIP_CONTROL E2E_RUN KIP_IMAGE" \
	  $(BIN)/testcluster -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/e2e -control .vm/control -- \
	  sh -c 'hack/vm.sh run -t $(shell echo $$(( ($(E2E_MINUTES) + 5) * 60 ))) -f $$KIP_APISERVER_PORT -- $(BIN)/e2e.test -test.v -test.timeout $(E2E_MINUTES)m $${E2E_RUN:+-test.run "$$E2E_RUN"}'

test: unit e2e

# The support matrix (docs/compatibility.md), a release check: the core of
# the VM suite on each kernel of MATRIX_KERNELS against $(K8S_VERSION), and on
# 6.1 against each release of MATRIX_K8S with its own kube-proxy as the
# oracle. Report in $(CACHE)/matrix/report.md. The first run builds each
# release's binaries (~10 minutes each).
MATRIX_KERNELS ?= 5.10 6.1 6.12
MATRIX_K8S ?= 1.34.4 1.35.4 1.36.3
MATRIX_RUN ?= ^(TestSameKernelStateAsUpstream|TestSetsMadeAtIPSetToolsRevisions|TestClusterIPTraffic|TestNodePortTraffic|TestExternalIPs|TestLoadBalancer|TestDualStack|TestSCTPTraffic|TestSessionAffinity|TestUDPFlowLeavesRemovedPod|TestLongLivedConnectionDrains|TestRestartLosesNothing|TestDriftRepair|TestInternalTrafficPolicyLocal|TestNodePortLocal)$$
matrix: e2e-bins image
	MATRIX_KERNELS="$(MATRIX_KERNELS)" MATRIX_K8S="$(MATRIX_K8S)" MATRIX_RUN='$(MATRIX_RUN)' hack/matrix.sh

# The real node (e2e/node): kubelet, containerd, CoreDNS and real pods in the
# VM, the proxier deployed as an operator would. Each proxier of
# NODE_PROXIERS gets its own VM and cluster: chart (ours, rendered from
# charts/kube-ipvs-proxy by helm template, with kube-proxy's labels), ours
# (deploy/ with kubectl apply -k) or upstream. Logs go to
# $(CACHE)/node-e2e/<proxier>/. Too long for make test: a release check
# (docs/testing.md).
node-e2e: e2e-bins k8s-bins vm-kernel image $(HELM)
	hack/node.sh >/dev/null
	$(GO) test -c -tags e2e -o $(BIN)/node-e2e.test ./e2e/node
	@for p in $(or $(NODE_PROXIERS),chart upstream); do echo "== node-e2e: $$p"; \
	  KBIN=$$(hack/k8s-bins.sh) KIP_IMAGE=$(CACHE)/image/kube-ipvs-proxy.tar KIP_IMAGE_TAG=$(VERSION) KIP_NODE_PROXIER=$$p KIP_HELM=$(HELM) \
	  KIP_VM_ENV="KBIN KIP_STATE KIP_CACHE KIP_IMAGE KIP_IMAGE_TAG KIP_NODE_PROXIER K8S_VERSION KIP_HELM" \
	  $(BIN)/testcluster -controllers -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/node-$$p -- \
	    sh -c 'hack/vm.sh run -m 6144 -t 1800 -f $$KIP_APISERVER_PORT -p $$KIP_TUNNEL_PORT:8132 -- $(BIN)/node-e2e.test -test.v -test.timeout 25m $${E2E_RUN:+-test.run "$$E2E_RUN"}'; \
	  rc=$$?; rm -rf $(CACHE)/node-e2e/$$p; mkdir -p $(CACHE)/node-e2e/$$p; cp -a .vm/artifacts/. $(CACHE)/node-e2e/$$p/ 2>/dev/null; \
	  cp -a $(CACHE)/run/node-$$p/*.log $(CACHE)/node-e2e/$$p/ 2>/dev/null; \
	  [ $$rc -eq 0 ] || { echo "node-e2e: $$p failed (logs in $(CACHE)/node-e2e/$$p)"; exit $$rc; }; done

# Several nodes in one VM (e2e/multinode, framework.Bed): each a network and
# mount namespace with its own containerd, kubelet and proxier pod, pods
# routed between them; cross-node tests with clients outside every node.
# Per proxier of NODE_PROXIERS (default ours upstream), logs in
# $(CACHE)/multinode-e2e/<proxier>/.
# A release check (docs/testing.md).
# NODES: how many (3 unless set above 1; make conformance's default is 1).
NODES ?= 1
MULTINODE_COUNT = $(if $(filter-out 0 1,$(NODES)),$(NODES),3)
MULTINODE_NAMES = $(shell seq -s, -f 'kip-node-%g' 1 $(MULTINODE_COUNT))
multinode-e2e: e2e-bins k8s-bins vm-kernel image
	hack/node.sh >/dev/null
	$(GO) test -c -tags e2e -o $(BIN)/multinode-e2e.test ./e2e/multinode
	@for p in $(or $(NODE_PROXIERS),ours upstream); do echo "== multinode-e2e: $$p"; \
	  KBIN=$$(hack/k8s-bins.sh) KIP_IMAGE=$(CACHE)/image/kube-ipvs-proxy.tar KIP_IMAGE_TAG=$(VERSION) KIP_NODE_PROXIER=$$p KIP_NODES=$(MULTINODE_COUNT) \
	  KIP_VM_ENV="KBIN KIP_STATE KIP_CACHE KIP_IMAGE KIP_IMAGE_TAG KIP_NODE_PROXIER K8S_VERSION KIP_NODES" \
	  $(BIN)/testcluster -controllers -kubelets $(MULTINODE_NAMES) -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/multinode-$$p -- \
	    sh -c 'hack/vm.sh run -m 10240 -t 2400 -f $$KIP_APISERVER_PORT -p $$KIP_TUNNEL_PORT:8132 -- $(BIN)/multinode-e2e.test -test.v -test.timeout 35m $${E2E_RUN:+-test.run "$$E2E_RUN"}'; \
	  rc=$$?; rm -rf $(CACHE)/multinode-e2e/$$p; mkdir -p $(CACHE)/multinode-e2e/$$p; cp -a .vm/artifacts/. $(CACHE)/multinode-e2e/$$p/ 2>/dev/null; \
	  cp -a $(CACHE)/run/multinode-$$p/*.log $(CACHE)/multinode-e2e/$$p/ 2>/dev/null; \
	  [ $$rc -eq 0 ] || { echo "multinode-e2e: $$p failed (logs in $(CACHE)/multinode-e2e/$$p)"; exit $$rc; }; done

# Kubernetes' own e2e tests (e2e.test v$(K8S_VERSION)) once per proxier:
# on the real node, the [sig-network] Services tests, results in
# $(CACHE)/conformance/; with NODES=3, upstream's IPVS kind-job selection on
# e2e/multinode's nodes, in $(CACHE)/conformance-3nodes/. Release checks
# (times in docs/testing.md); CI runs 18 conformance tests with ours.
CONFORMANCE_PROXIERS ?= ours upstream
CONFORMANCE_DIR = $(CACHE)/conformance$(if $(filter-out 0 1,$(NODES)),-$(NODES)nodes)
conformance: e2e-bins k8s-bins vm-kernel image
	hack/node.sh >/dev/null
	$(GO) test -c -tags e2e -o $(BIN)/node-e2e.test ./e2e/node
	$(GO) test -c -tags e2e -o $(BIN)/multinode-e2e.test ./e2e/multinode
	@rc=0; NODES=$(NODES) KIP_IMAGE=$(CACHE)/image/kube-ipvs-proxy.tar KIP_IMAGE_TAG=$(VERSION) hack/conformance.sh $(CONFORMANCE_PROXIERS) || rc=$$?; \
	  $(GO) run ./hack/conformance-report $(CONFORMANCE_DIR) $(CONFORMANCE_PROXIERS) && exit $$rc

# A real apiserver, the proxier in the VM, a few sample Services and pods,
# then the IPVS table and a request answered through a ClusterIP.
demo: e2e-bins k8s-bins vm-kernel
	KBIN=$$(hack/k8s-bins.sh) KIP_VM_ENV="KBIN KIP_STATE" \
	  $(BIN)/testcluster -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/demo -- \
	  sh -c 'hack/vm.sh run -t 900 -f $$KIP_APISERVER_PORT -- $(BIN)/demo'

# Benchmarks: kube-ipvs-proxy, upstream kube-proxy and a raw-netlink floor on
# the same kernel and objects, in the VM. Results go to the cache,
# $(CACHE)/bench/results/<date>-<commit>/ (results.json, report.md, SVG plots,
# CPU and heap profiles with their top functions); latest links to it. The
# repository keeps one baseline, bench/baseline/, merged from several runs by
# `make bench-baseline` (docs/performance.md). bench-quick is the developer's check after a change:
# 1k Services, no upstream.
BENCH_SCALES ?= $(if $(filter large,$(BENCH_SCALE)),1000$(comma)10000$(comma)50000,1000$(comma)10000)
BENCH_PROXIERS ?= floor,kube-ipvs-proxy,kube-proxy,fake
BENCH_ARGS ?=
# e.g. BENCH_SCENARIOS=cold-start,churn; kept out of BENCH_ARGS, which keys the seed.
BENCH_SCENARIOS ?=
# e.g. BENCH_OURS_FLAGS=--ipvs-sync-period=1h: extra flags for kube-ipvs-proxy.
BENCH_OURS_FLAGS ?=
# e.g. BENCH_BEFORE=v0.9.0: kube-ipvs-proxy built from that commit runs in
# the same run as kube-ipvs-proxy-before, beside the current code.
BENCH_BEFORE ?=
# The VM's time limit: a 50k run takes ~40 min without KVM.
BENCH_VM_TIMEOUT ?= $(if $(findstring 50000,$(BENCH_SCALES)),7200,4200)
# The first scale's API objects are created once, from the host, and kept as
# an etcd data directory (the seed) in the cache, keyed by BENCH_ARGS and the
# files that make the objects (bench/dual.go too for the dual-stack mix); the
# VM creates what later scales add. Creating 50k Services takes ~45 min:
# kube-apiserver lists every IPAddress for its metrics on each ClusterIP
# allocation.
BENCH_FIRST_SCALE = $(firstword $(subst $(comma), ,$(BENCH_SCALES)))
BENCH_SEED = $(CACHE)/bench-seed/$(BENCH_FIRST_SCALE)-$(shell { echo '$(BENCH_ARGS)'; cat bench/objects.go $(if $(findstring dual,$(BENCH_ARGS)),bench/dual.go); } | sha256sum | cut -c1-12)
comma := ,
BENCH_RESULTS = $(CACHE)/bench/results
bench-quick: BENCH_SCALES = 1000
bench-quick: BENCH_PROXIERS = floor,kube-ipvs-proxy
# bench-seed alone makes the seed ahead of a run (the host only, no VM).
bench-seed: e2e-bins k8s-bins
	@if [ ! -d $(BENCH_SEED) ]; then \
	  $(BIN)/testcluster -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/bench-seed -- \
	    $(BIN)/bench -create $(BENCH_FIRST_SCALE) $(BENCH_ARGS) && \
	  mkdir -p $(dir $(BENCH_SEED)) && rm -rf $(BENCH_SEED).tmp && \
	  cp -a $(CACHE)/run/bench-seed/etcd $(BENCH_SEED).tmp && mv $(BENCH_SEED).tmp $(BENCH_SEED); fi
	@echo "seed: $(BENCH_SEED)"
bench-quick bench: bench-seed vm-kernel
	@if [ -n "$(BENCH_BEFORE)" ]; then src=$(CACHE)/bench/before-src; rm -rf $$src && mkdir -p $$src && \
	  git archive $(BENCH_BEFORE) | tar -x -C $$src && (cd $$src && $(GO) build -o $(CURDIR)/$(BIN)/kube-ipvs-proxy-before .); fi
	@run=$$(date -u +%Y%m%d-%H%M%S)-$$(git rev-parse --short HEAD); tmp=.vm/bench/$$run; \
	rm -rf .vm/bench; mkdir -p $$tmp $(BENCH_RESULTS); \
	KBIN=$$(hack/k8s-bins.sh) KIP_VM_ENV="KBIN KIP_STATE" \
	  $(BIN)/testcluster -bin "$$(hack/k8s-bins.sh)" -state $(CACHE)/run/bench -etcd-seed $(BENCH_SEED) -- \
	  sh -c "hack/vm.sh run -m 6144 -t $(BENCH_VM_TIMEOUT) -f \$$KIP_APISERVER_PORT -- $(BIN)/bench -scales $(BENCH_SCALES) -proxiers $(BENCH_PROXIERS)$(if $(BENCH_BEFORE),$(comma)kube-ipvs-proxy-before) -out $$tmp $(BENCH_ARGS) $(if $(BENCH_SCENARIOS),-scenarios $(BENCH_SCENARIOS)) $(if $(BENCH_OURS_FLAGS),-ours-flags '$(BENCH_OURS_FLAGS)')"; \
	code=$$?; dir=$(BENCH_RESULTS)/$$run; mv $$tmp $$dir && rm -rf .vm/bench && [ $$code = 0 ] \
	&& hack/bench-profiles.sh $$dir && ln -sfn $$run $(BENCH_RESULTS)/latest && echo "report: $$dir/report.md"

# Make the repository's baseline from runs under $(BENCH_RESULTS): their
# results merged, one report and its plots. A mix at a scale comes from one
# run; e.g. BENCH_BASELINE_RUNS="20261201-101500-abc1234 20261201-120000-abc1234".
# "baseline" first stands for the committed one: the runs after it replace the
# parts they measured again and keep the rest.
BENCH_BASELINE_RUNS ?= latest
BENCH_BASELINE_DIRS = $(foreach r,$(BENCH_BASELINE_RUNS),$(if $(filter baseline,$(r)),bench/baseline,$(BENCH_RESULTS)/$(r)))
bench-baseline:
	@for d in $(BENCH_BASELINE_DIRS); do test -f $$d/results.json || { echo "no run $$d"; exit 1; }; done
	rm -rf $(CACHE)/bench/baseline.tmp
	$(GO) run ./bench -merge $(CACHE)/bench/baseline.tmp $(BENCH_BASELINE_DIRS)
	rm -rf bench/baseline && mv $(CACHE)/bench/baseline.tmp bench/baseline

clean:
	rm -rf $(BIN) .vm
