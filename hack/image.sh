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
hack/debs.sh "$dir/debs" -x "$dir/root" $(sed 's/#.*//' hack/image/packages)

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=$version" -o "$dir/kube-ipvs-proxy" .
created=$(git log -1 --format=%ct 2>/dev/null || date +%s)
archive=$dir/kube-ipvs-proxy-$version.tar
go run ./hack/image -root "$dir/root" -bin "$dir/kube-ipvs-proxy" -packages hack/image/packages \
  -version "$version" -revision "$(git rev-parse HEAD 2>/dev/null || echo unknown)" -created "$created" -o "$archive"
ln -sfn "$(basename "$archive")" "$dir/kube-ipvs-proxy.tar"
echo "$archive"
