#!/usr/bin/env bash
# matrix.sh: the support matrix (docs/compatibility.md), a release check. The
# core of the VM suite (MATRIX_RUN) runs once per kernel of MATRIX_KERNELS
# against kube-apiserver and kube-proxy $K8S_VERSION (the oracle), and once per
# release of MATRIX_K8S on the default kernel, that release's kube-proxy the
# oracle. Each cell's log and the report (report.md: cell, result, time) go to
# $KIP_CACHE/matrix/; the exit code is 1 if any cell failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${KIP_CACHE:?}/matrix
rm -rf "$out"; mkdir -p "$out"
report=$out/report.md
{
  echo "# Support matrix, $(git describe --always --dirty), $(date -u +%Y-%m-%d)"
  echo
  echo "Tests: \`${MATRIX_RUN}\`"
  echo
  echo "| kube-apiserver and oracle | kernel | result | tests passed | minutes |"
  echo "|---|---|---|---|---|"
} >"$report"
failed=0
cell() { # cell K8S_VERSION KERNEL
  local k8s=$1 kernel=$2 log="$out/v$1-linux-$2.log" start rc
  echo "== matrix: kube-apiserver v$k8s, Linux $kernel" >&2
  start=$(date +%s)
  # A variable given to the outer make on its command line would win over
  # the cell's own through MAKEFLAGS.
  env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS KIP_KERNEL="$kernel" K8S_VERSION="$k8s" E2E_RUN="$MATRIX_RUN" \
    make --no-print-directory CACHE="$KIP_CACHE" e2e >"$log" 2>&1
  rc=$?
  local passed total
  passed=$(grep -c '^--- PASS' "$log"); total=$(grep -cE '^--- (PASS|FAIL|SKIP)' "$log")
  [ $rc -eq 0 ] || failed=1
  echo "| v$k8s | $kernel | $([ $rc -eq 0 ] && echo passed || echo "**failed** (rc $rc)") | $passed of $total | $(( ($(date +%s) - start + 59) / 60 )) |" >>"$report"
  grep -E '^--- FAIL' "$log" | sed 's/^/    /' >&2
}
for kernel in $MATRIX_KERNELS; do cell "$K8S_VERSION" "$kernel"; done
for k8s in $MATRIX_K8S; do [ "$k8s" = "$K8S_VERSION" ] || cell "$k8s" "${MATRIX_K8S_KERNEL:-6.1}"; done
cat "$report"
exit $failed
