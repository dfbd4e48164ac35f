#!/usr/bin/env bash
# `make bench`: the Go benchmarks, then `simulate` on the shared traces
# (../shared/traces, or $TRACES) when they are present; the simulate tables
# are written into README.md between the simulate-bench markers.
set -euo pipefail
cd "$(dirname "$0")/.."

go test -run '^$' -bench . -benchmem -cpu 1 ./...

traces=${TRACES:-../shared/traces}
if [ ! -d "$traces" ]; then
  echo "bench: no traces at $traces; README's simulate tables left as they are" >&2
  exit 0
fi
go build -o bin/autoscaler ./cmd/autoscaler
block=$(mktemp)
trap 'rm -f "$block" "$block.readme"' EXIT

run() { # title trace [flags]
  local title=$1 trace=$2; shift 2
  [ -f "$traces/$trace" ] || { echo "bench: $traces/$trace missing, skipped" >&2; return; }
  local t0 t1
  t0=$(date +%s.%N)
  local table
  table=$(bin/autoscaler simulate -config examples/local.hcl -trace "$traces/$trace" "$@")
  t1=$(date +%s.%N)
  {
    echo "$title ($(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s on this machine):"
    echo
    echo '```text'
    echo "\$ autoscaler simulate -config examples/local.hcl -trace ../shared/traces/$trace${*:+ $*}"
    echo "$table"
    echo '```'
    echo
  } >>"$block"
}
run "Philly (Microsoft's GPU training cluster, 111,549 jobs over 129 days)" philly_rfold/philly_trace.csv
run "Helios Earth (SenseTime, per-minute running + pending GPUs, 31 days)" helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv \
  -value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc

awk -v block="$block" '
  /<!-- simulate-bench:start -->/ { print; while ((getline line < block) > 0) print line; skip = 1; next }
  /<!-- simulate-bench:end -->/ { skip = 0 }
  !skip { print }
' README.md >"$block.readme"
mv "$block.readme" README.md
echo "bench: README.md simulate tables updated" >&2
