#!/usr/bin/env bash
# Generates the provider plugin protocol's Go code
# (providers/plugin/proto/*.pb.go, committed) from provider.proto, with the
# pinned generators, so that the same .proto always makes the same code:
#   scripts/proto.sh            # regenerate in place (make proto)
#   scripts/proto.sh DIR        # generate into DIR (the up-to-date test)
#   scripts/proto.sh --install  # install what is missing first (CI)
# protoc is Debian's protobuf-compiler, with the well-known types from
# libprotobuf-dev; the Go plugins are installed at their pinned versions
# into $GOBIN (or $(go env GOPATH)/bin). A tool missing or of another
# version exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_VERSION="libprotoc 3.21.12"
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=1.6.2
bin="$(go env GOBIN)"
bin="${bin:-$(go env GOPATH)/bin}"
export PATH="$bin:$PATH"

if [ "${1:-}" = "--install" ]; then
  shift
  if ! command -v protoc >/dev/null || [ ! -f /usr/include/google/protobuf/duration.proto ]; then
    echo "proto: installing protoc (protobuf-compiler, libprotobuf-dev)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler libprotobuf-dev) >&2
  fi
  [ "$(protoc-gen-go --version 2>/dev/null)" = "protoc-gen-go $PROTOC_GEN_GO" ] ||
    go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
  [ "$(protoc-gen-go-grpc --version 2>/dev/null)" = "protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC" ] ||
    go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v$PROTOC_GEN_GO_GRPC"
fi

check() {
  local got
  got="$("$1" --version 2>/dev/null || true)"
  if [ "$got" != "$2" ]; then
    echo "proto: $1 is '${got:-missing}', want '$2' (scripts/proto.sh --install)" >&2
    exit 3
  fi
}
check protoc "$PROTOC_VERSION"
check protoc-gen-go "protoc-gen-go $PROTOC_GEN_GO"
check protoc-gen-go-grpc "protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC"
if [ ! -f /usr/include/google/protobuf/duration.proto ]; then
  echo "proto: the well-known types (/usr/include/google/protobuf) are missing: apt-get install libprotobuf-dev (scripts/proto.sh --install)" >&2
  exit 3
fi

src=providers/plugin/proto
out="${1:-$src}"
mkdir -p "$out"
protoc -I "$src" -I /usr/include --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative "$src/provider.proto"
