# The same image as `make image`, for a docker, buildah or kaniko build with
# base images from a registry:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t kube-ipvs-proxy .
# The build stage installs hack/image/packages and runs hack/image, which
# picks the same files `make image` takes from the unpacked packages.
ARG GO_IMAGE=golang:1.26-bookworm
FROM ${GO_IMAGE} AS build
COPY hack/image/packages /tmp/packages
RUN apt-get update \
 && apt-get install -y --no-install-recommends $(sed 's/#.*//' /tmp/packages) \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" -o /kube-ipvs-proxy . \
 && go run ./hack/image -root / -bin /kube-ipvs-proxy -packages hack/image/packages -rootfs /out

FROM scratch
ARG VERSION=unknown
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /out/ /
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
LABEL org.opencontainers.image.title="kube-ipvs-proxy" \
      org.opencontainers.image.description="An IPVS Kubernetes service proxy, a drop-in for kube-proxy --proxy-mode=ipvs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
ENTRYPOINT ["/usr/local/bin/kube-ipvs-proxy"]
