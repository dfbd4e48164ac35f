#!/usr/bin/env bash
# make image: the controller's container image from scratch
# (scripts/release/Dockerfile), from make release's static controller
# binary for this machine's architecture, tagged IMAGE:VERSION
# (fleetcast/autoscaler, git describe's version): Docker's builder here
# makes images of its own platform, so the arm64 image is built on an
# arm64 machine (from the same release). It pulls
# nothing: the context holds the binary, this machine's CA roots
# (Debian's ca-certificates) and the user the controller runs as.
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
dist="${OUT:-dist}"
arch="$(go env GOARCH)"
[ -z "${ARCH:-}" ] || [ "$ARCH" = "$arch" ] || { echo "image: this machine builds linux/$arch images; build the $ARCH one on a $ARCH machine" >&2; exit 1; }
image="${IMAGE:-fleetcast/autoscaler}"
roots="${CA_ROOTS:-/etc/ssl/certs/ca-certificates.crt}"
bin="$dist/autoscaler-linux-$arch"
[ -x "$bin" ] || { echo "image: $bin is missing: make release first" >&2; exit 1; }
[ -s "$roots" ] || { echo "image: no CA roots at $roots (apt-get install ca-certificates, or set CA_ROOTS)" >&2; exit 1; }
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp scripts/release/Dockerfile "$bin" "$ctx/"
cp "$roots" "$ctx/ca-certificates.crt"
echo "fleetcast:x:65532:65532:Fleetcast controller:/var/lib/fleetcast:/sbin/nologin" > "$ctx/passwd"
echo "fleetcast:x:65532:" > "$ctx/group"
mkdir "$ctx/state"
docker build -q --build-arg "ARCH=$arch" --label "org.opencontainers.image.version=$version" \
  -t "$image:$version" "$ctx" >&2
echo "$image:$version"
