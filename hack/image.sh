#!/usr/bin/env bash
# image.sh VERSION: build the container image archive into the cache, with no
# container daemon and no registry. The Debian packages of hack/image/packages
# are downloaded (not installed) and unpacked into a scratch root; hack/image
# takes the programs and libraries from it, adds the static proxier, and
# writes an OCI image archive. Prints the archive's path last.
set -euo pipefail
version=${1:?usage: image.sh VERSION}
cd "$(dirname "$0")/.."
cache=${KIP_CACHE:?KIP_CACHE unset (run it through make image)}
dir=$cache/image
mkdir -p "$dir/debs"

pkgs=$(sed 's/#.*//' hack/image/packages | xargs)
missing=""
for p in $pkgs; do ls "$dir/debs/${p}"_*.deb >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  (cd "$dir/debs" && { apt-get download $missing >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get download $missing >/dev/null; }; })
fi
rm -rf "$dir/root" && mkdir -p "$dir/root"
for p in $pkgs; do dpkg-deb -x "$(ls "$dir/debs/${p}"_*.deb | tail -1)" "$dir/root"; done

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=$version" -o "$dir/kube-ipvs-proxy" .
created=$(git log -1 --format=%ct 2>/dev/null || date +%s)
archive=$dir/kube-ipvs-proxy-$version.tar
go run ./hack/image -root "$dir/root" -bin "$dir/kube-ipvs-proxy" -packages hack/image/packages \
  -version "$version" -revision "$(git rev-parse HEAD 2>/dev/null || echo unknown)" -created "$created" -o "$archive"
ln -sfn "$(basename "$archive")" "$dir/kube-ipvs-proxy.tar"
echo "$archive"
