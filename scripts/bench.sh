#!/usr/bin/env bash
# `make bench`: the Go benchmarks, then `simulate` and `simulate -frontier`
# on the shared traces (../shared/traces, or $TRACES) when they are present;
# the tables are written into README.md between the simulate-bench markers,
# and the frontiers' pictures into docs/.
set -euo pipefail
cd "$(dirname "$0")/.."

# BENCH_GO=0 skips the Go benchmarks (the README's tables only).
if [ "${BENCH_GO:-1}" != 0 ]; then
  go test -run '^$' -bench . -benchmem -cpu 1 ./...
  # The simulation's target is on two cores: its policies run side by side.
  go test -run '^$' -bench '^BenchmarkSimulatePhilly$' -benchmem -cpu 2 ./simulate
fi

traces=${TRACES:-../shared/traces}
if [ ! -d "$traces" ]; then
  echo "bench: no traces at $traces; README's simulate tables left as they are" >&2
  exit 0
fi
go build -o bin/autoscaler ./cmd/autoscaler
block=$(mktemp)
trap 'rm -f "$block" "$block.readme"' EXIT

# series is where the shared benchmark series are, beside the traces.
series=${SERIES:-$traces/../bench/series}

# run TITLE CONFIG TRACE [FLAGS]: one simulate table into the block; with
# -frontier among the flags, its picture into docs/frontier-NAME.svg too.
run() {
  local title=$1 config=$2 trace=$3; shift 3
  [ -f "$trace" ] || { echo "bench: $trace missing, skipped" >&2; return; }
  local shown=$trace
  case $trace in
    "$series"/*) shown=../shared/bench/series/${trace#"$series"/} ;;
    "$traces"/*) shown=../shared/traces/${trace#"$traces"/} ;;
  esac
  local t0 t1 table pic=""
  if [[ " $* " == *" -frontier "* ]]; then
    pic=docs/frontier-$(basename "$trace" .csv | cut -d_ -f1).svg
    mkdir -p docs
    set -- "$@" -plot "$pic"
  fi
  t0=$(date +%s.%N)
  table=$(bin/autoscaler simulate -config "$config" -trace "$trace" "$@")
  t1=$(date +%s.%N)
  {
    echo "$title ($(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s on this machine):"
    echo
    echo '```text'
    echo "\$ autoscaler simulate -config $config -trace $shown${*:+ $*}"
    echo "$table"
    echo '```'
    echo
    [ -z "$pic" ] || { echo "![$title]($pic)"; echo; }
  } >>"$block"
}
philly=$traces/philly_rfold/philly_trace.csv
helios=$traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv
servegen=$series/servegen_msmall_10m.csv
heliosFlags=(-value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc)
run "Philly (Microsoft's GPU training cluster, 111,549 jobs over 129 days), the fair pools" examples/philly-fair.hcl "$philly"
run "Helios Earth (SenseTime, per-minute running + pending GPUs, 31 days)" examples/local.hcl "$helios" "${heliosFlags[@]}"
run "ServeGen m-small (Alibaba Bailian, requests/s every 10 minutes over 14 days, one GPU per 10 requests/s)" examples/local.hcl "$servegen" -scale 0.1
# A burst that comes once: whether capacity is released after it. The series
# is synthetic (scripts/one-off-burst.py) and kept in examples/, not a shared trace.
run "A burst that comes once (synthetic, from scripts/one-off-burst.py: a daily cycle of 100-300 GPUs and 300 more for two hours on day 8), the three days from day 7" examples/local.hcl examples/one-off-burst-10m.csv -from 7d -days 3 -policies reactive,headroom,predictive,perfect,oracle
echo '#### Cost against waiting: the frontiers' >>"$block"
echo >>"$block"
# Each frontier with the perfect ablation at four margins: what the true
# future demand buys at each buffer's waiting, beside what the forecast buys.
margins=0,0.05,0.1,0.2
run "Philly frontier, with the perfect ablation" examples/philly-fair.hcl "$philly" -frontier -perfect-margin "$margins"
run "Helios Earth frontier, with the perfect ablation" examples/local.hcl "$helios" "${heliosFlags[@]}" -frontier -perfect-margin "$margins"
run "ServeGen m-small frontier, with the perfect ablation" examples/local.hcl "$servegen" -scale 0.1 -frontier -perfect-margin "$margins"

echo '#### Announced demand: the sensitivity' >>"$block"
echo >>"$block"
for share in 0.25 0.5 1; do
  run "Philly, a share of $share of the jobs announced 30 minutes ahead" examples/philly-fair.hcl "$philly" -policies reactive,predictive,oracle -announce-share "$share"
done

echo '#### Runtime estimates: the sensitivity' >>"$block"
echo >>"$block"
for est in exact limits; do
  run "Philly, the scheduler telling running jobs' ends: $est" examples/philly-fair.hcl "$philly" -policies reactive,predictive,oracle -runtime-estimates "$est"
done

echo '#### The reservation advice against hindsight' >>"$block"
echo >>"$block"
run "Philly, the advice against fixed reservations" examples/philly-fair.hcl "$philly" -advice-check
run "Helios Earth, the advice against fixed reservations" examples/local.hcl "$helios" "${heliosFlags[@]}" -advice-check
run "ServeGen m-small, the advice against fixed reservations (14 days: first reviewed after 7)" examples/local.hcl "$servegen" -scale 0.1 -advice-check -advice-after 7d

awk -v block="$block" '
  /<!-- simulate-bench:start -->/ { print; while ((getline line < block) > 0) print line; skip = 1; next }
  /<!-- simulate-bench:end -->/ { skip = 0 }
  !skip { print }
' README.md >"$block.readme"
mv "$block.readme" README.md
echo "bench: README.md simulate tables updated" >&2
