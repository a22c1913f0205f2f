#!/usr/bin/env bash
# release.sh VERSION: a release's files, in $KIP_CACHE/release/VERSION/
# (docs/releasing.md):
#   kube-ipvs-proxy-VERSION.tar          the image for linux/amd64 and
#                                        linux/arm64, one OCI index
#   kube-ipvs-proxy-VERSION.yaml         deploy/ rendered, at this image tag
#   kube-ipvs-proxy-CHART_VERSION.tgz    the Helm chart, packaged
#   SHA256SUMS
# Before it writes them, the arm64 build is proven to run: every package's
# unit tests, built for arm64, under Debian's qemu-user-static (QEMU's
# user-mode emulation), as report-arm64.txt says.
#
# VERSION must be a semantic version (v0.1.0, v0.2.0-rc.1): the image tag,
# the chart's appVersion, and (without its v) the chart's version.
set -euo pipefail
version=${1:?usage: release.sh VERSION}
cd "$(dirname "$0")/.."
cache=${KIP_CACHE:?KIP_CACHE unset (run it through make release)}
helm=${HELM:?HELM unset (run it through make release)}
[[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] || {
  echo "release.sh: VERSION=$version is no semantic version (v0.1.0, v0.2.0-rc.1): tag the commit (git tag v0.1.0) or pass VERSION=" >&2; exit 2; }
[ -z "$(git status --porcelain 2>/dev/null)" ] || [ -n "${RELEASE_DIRTY:-}" ] || {
  echo "release.sh: the tree has uncommitted changes; a release is built from a commit (RELEASE_DIRTY=1 to try anyway)" >&2; exit 2; }
out=$cache/release/$version
work=$cache/release/work
mkdir -p "$work" && rm -rf "$out" && mkdir -p "$out"
archs="amd64 arm64"

# Each architecture's Debian root (its packages downloaded, not installed;
# arm64's from the same mirror through a private package list) and static
# binary.
for a in $archs; do
  opts=""
  [ "$a" = amd64 ] || opts=$(hack/apt-suite.sh "$work/apt-$a" bookworm "$a" | tr '\n' ' ')
  KIP_APT_OPTS=$opts hack/debs.sh "$work/debs-$a" -x "$work/root-$a" $(sed 's/#.*//' hack/image/packages)
  CGO_ENABLED=0 GOARCH=$a go build -trimpath -ldflags "-s -w -X main.buildVersion=$version" -o "$work/kube-ipvs-proxy-$a" .
done

# The arm64 build runs: each package's tests under qemu-aarch64. Skipped,
# each for a reason of the emulator's, not the code's:
#  - tests that start their own test binary again (logs, the CPU count):
#    starting an arm64 program needs binfmt_misc, which we do not register
#    on the build machine;
#  - TestNetlinkDeletesTheNFTablesModeTable: qemu-user translates only
#    NETLINK_ROUTE, _AUDIT and _KOBJECT_UEVENT sockets, not NETLINK_NETFILTER.
skip='^(TestJSONLogToTheLastLine|TestTextLogIsKlogs|TestJSONLogIsComponentBases|TestUnknownConfigFieldNamedAtOnce|TestNodeCPUsCountsOnlineCPUsNotTheCpuset|TestNetlinkDeletesTheNFTablesModeTable)$'
hack/debs.sh "$work/debs-qemu" -x "$work/qemu" qemu-user-static
qemu=$work/qemu/usr/bin/qemu-aarch64-static
report=$out/report-arm64.txt
rm -rf "$work/tests" && mkdir -p "$work/tests"
echo "# $version: unit tests built for linux/arm64, run under $($qemu --version | head -1)" >"$report"
echo "# skipped: $skip" >>"$report"
failed=0
for p in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
  bin=$work/tests/$(echo "$p" | tr / _).test
  GOARCH=arm64 go test -c -o "$bin" "$p"
  start=$(date +%s)
  if (cd "$(go list -f '{{.Dir}}' "$p")" && "$qemu" "$bin" -test.count=1 -test.skip "$skip" >"$bin.log" 2>&1); then
    echo "ok    $p $(( $(date +%s) - start ))s" >>"$report"
  else
    echo "FAIL  $p (log: $bin.log)" >>"$report"; failed=1
  fi
done
echo "kube-ipvs-proxy-arm64 --version: $("$qemu" "$work/kube-ipvs-proxy-arm64" --version 2>&1)" >>"$report"
cat "$report"
[ $failed -eq 0 ] || { echo "release.sh: arm64 tests failed" >&2; exit 1; }

# The image: one archive, an index of both architectures, tagged VERSION.
created=$(git log -1 --format=%ct)
go run ./hack/image -arch "${archs// /,}" -root "$work/root-{arch}" -bin "$work/kube-ipvs-proxy-{arch}" \
  -packages hack/image/packages -version "$version" -tags "" -revision "$(git rev-parse HEAD)" -created "$created" \
  -o "$out/kube-ipvs-proxy-$version.tar"

# deploy/ at this tag, and the chart at this version.
kubectl=$(hack/k8s-bins.sh)/kubectl
overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
printf 'resources: [%s]\nimages: [{name: localhost/kube-ipvs-proxy, newTag: "%s"}]\n' "$(realpath --relative-to="$overlay" deploy)" "$version" >"$overlay/kustomization.yaml"
"$kubectl" kustomize "$overlay" >"$out/kube-ipvs-proxy-$version.yaml"
"$helm" package charts/kube-ipvs-proxy --version "${version#v}" --app-version "$version" -d "$out" 2>&1 | grep -v 'found symbolic link'
(cd "$out" && sha256sum kube-ipvs-proxy-* >SHA256SUMS)
echo "release.sh: $version in $out:"
ls -l "$out"
