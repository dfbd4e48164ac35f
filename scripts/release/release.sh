#!/usr/bin/env bash
# make release: Fleetcast's binaries for linux/amd64 and linux/arm64, their
# tarballs and SHA-256 sums, in dist/ (or $OUT).
#
#   autoscaler-linux-ARCH        the controller and its tools: no cgo, no
#                                dynamic dependency (a static binary)
#   autoscaler-agent-linux-ARCH  the node's agent: cgo for NVML (loaded at
#                                run time), glibc 2.28 or later (Rocky and
#                                RHEL 8, Debian 10, Ubuntu 20.04)
#   fleetcast-VERSION-linux-ARCH.tar.gz  both, with the README and licence
#   SHA256SUMS                   sha256sum's lines for all of the above
#
# The version is git describe's (VERSION overrides it). The agent is built
# against this machine's glibc, newer than 2.28, with each newer symbol
# pinned to its old version (glibc/glibc-compat.h, forced into every C file) and
# crt1's call to __libc_start_main sent to the old version
# (glibc/glibc-start.c): scripts/release's test reads every binary's highest
# glibc version and runs the arm64 ones under qemu. arm64's C compiler is
# Debian's gcc-aarch64-linux-gnu with libc6-dev-arm64-cross (amd64's, on an
# arm64 machine, gcc-x86-64-linux-gnu).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/release
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
out="${OUT:-dist}"
arches="${ARCHES:-amd64 arm64}"
go="${GO:-go}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
host="$("$go" env GOHOSTARCH)"

# cc ARCH: the C compiler that targets linux/ARCH from here.
cc() {
  if [ "$1" = "$host" ]; then echo gcc; return; fi
  case "$1" in
    amd64) echo x86_64-linux-gnu-gcc ;;
    arm64) echo aarch64-linux-gnu-gcc ;;
    *) echo "release: no C compiler known for $1" >&2; return 1 ;;
  esac
}

for arch in $arches; do
  echo "release: $version linux/$arch" >&2
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$go" build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$out/autoscaler-linux-$arch" ./cmd/autoscaler

  c="$(cc "$arch")"
  command -v "$c" >/dev/null || { echo "release: $c is needed for the agent on linux/$arch (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2; exit 1; }
  "$c" -O2 -fPIC -c "$here/glibc/glibc-start.c" -o "$tmp/start-$arch.o"
  # libpthread.so.0 and libdl.so.2 are named, not -l'd: where an old glibc
  # has the pinned functions, and newer ones have stubs -l would drop.
  libs=""
  for lib in libpthread.so.0 libdl.so.2; do
    path="$("$c" -print-file-name="$lib")"
    [ -f "$path" ] || { echo "release: $c finds no $lib" >&2; exit 1; }
    libs+=" $path"
  done
  # netgo: the Go resolver, not glibc's (res_search is 2.34 in libc).
  CGO_ENABLED=1 GOOS=linux GOARCH="$arch" CC="$c" \
    CGO_CFLAGS="-O2 -Wno-deprecated-declarations -include $PWD/$here/glibc/glibc-compat.h" \
    "$go" build -trimpath -tags netgo \
    -ldflags "-s -w -X main.version=$version -extldflags '$tmp/start-$arch.o -Wl,--wrap=__libc_start_main -Wl,--no-as-needed$libs'" \
    -o "$out/autoscaler-agent-linux-$arch" ./cmd/autoscaler-agent

  dir="$tmp/fleetcast-$version-linux-$arch"
  mkdir -p "$dir"
  cp "$out/autoscaler-linux-$arch" "$dir/autoscaler"
  cp "$out/autoscaler-agent-linux-$arch" "$dir/autoscaler-agent"
  cp README.md LICENSE "$dir/"
  tar -C "$tmp" --owner=0 --group=0 --numeric-owner -czf "$out/fleetcast-$version-linux-$arch.tar.gz" "fleetcast-$version-linux-$arch"
done

(cd "$out" && sha256sum autoscaler-linux-* autoscaler-agent-linux-* fleetcast-*.tar.gz > SHA256SUMS)
echo "release: $out" >&2
cat "$out/SHA256SUMS"
