#!/usr/bin/env bash
# `make bench`: writes docs/benchmarks.md, every figure in it the output of
# the command shown above it, on this machine: the Go benchmarks (a planning
# cycle, a control cycle, a whole-trace simulation, the forecaster, the
# agent's sample and the report receiver) and the agent's memory, then
# `forecast -backtest`, `simulate` and `simulate -frontier` on the shared
# traces (../shared/traces, or $TRACES) when they are present, the
# frontiers' pictures into docs/img/. It changes nothing else (bin/ is
# build output). It needs GNU time (/usr/bin/time -v).
#   BENCH_GO=0  leaves out the Go benchmarks (their section says so)
#   BENCH_ALL=1 also runs every other Go benchmark, printed here, not kept
set -euo pipefail
cd "$(dirname "$0")/.."

page=docs/benchmarks.md
out=$(mktemp)
# scratch holds the agent's files and the pictures until the page is done.
scratch=$(mktemp -d)
agent=
cleanup() {
  [ -z "$agent" ] || kill "$agent" 2>/dev/null || true
  rm -rf "$out" "$out.err" "$scratch"
}
trap cleanup EXIT

# publish moves the page and its pictures into place, readable by all.
publish() {
  chmod 644 "$out"
  mv "$out" "$page"
  if compgen -G "$scratch/img/*.svg" >/dev/null; then
    mkdir -p docs/img
    chmod 644 "$scratch"/img/*.svg
    mv "$scratch"/img/*.svg docs/img/
  fi
}
make build >/dev/null

cat >"$out" <<'EOF'
# Benchmarks

After reading this page you know what Fleetcast costs and saves on the shared traces, against the
policies users run today, and how fast it plans, with the command that makes each figure.

`make bench` (`scripts/bench.sh`) writes this page, and the pictures in `docs/img/`, on the machine
it runs on (this one: @CORES@ cores, Go @GO@): every figure below is the output of the command
shown above it, but for the R anchors (quoted, with the command that made them) and the run times
in the simulations' titles (the script's own clock). How to read a simulation and a frontier is in [simulate.md](simulate.md); how the
figures moved, change by change, in the [CHANGELOG](../CHANGELOG.md).

## Speed

EOF
sed -i -e "s/@CORES@/$(nproc)/" -e "s/@GO@/$(go env GOVERSION | sed 's/^go//')/" "$out"

# gobench TEXT PKG NAME CPU COUNT: one Go benchmark's lines, after TEXT;
# NAME is a prefix of the benchmarks' names, or a name and $ for that one.
gobench() {
  local text=$1 pkg=$2 name=$3 cpu=$4 count=$5
  {
    echo "$text"
    echo
    echo '```text'
    echo "\$ go test $pkg -run '^\$' -bench '^$name' -benchmem -cpu $cpu -count $count"
    go test "$pkg" -run '^$' -bench "^$name" -benchmem -cpu "$cpu" -count "$count" | grep -E "^${name%\$}([- ]|$(printf '\t'))" | tr -s ' \t' ' ' | sed 's/ /   /g'
    echo '```'
    echo
  } >>"$out"
}

# gobenchx TEXT PKG NAME ARGS: one Go benchmark's lines, after TEXT, run
# with ARGS (-benchtime, -count) and its own metrics.
gobenchx() {
  local text=$1 pkg=$2 name=$3 args=$4
  {
    echo "$text"
    echo
    echo '```text'
    echo "\$ go test $pkg -run '^\$' -bench '^$name' $args"
    # shellcheck disable=SC2086 # ARGS are several flags
    go test "$pkg" -run '^$' -bench "^$name" $args | grep -E "^${name%\$}([-/ ]|$(printf '\t'))" | tr -s ' \t' ' ' | sed 's/ /   /g'
    echo '```'
    echo
  } >>"$out"
}

if [ "${BENCH_GO:-1}" != 0 ]; then
  gobench "One planning cycle (\`planner.Make\`) for 10,000 nodes (10% with silent agents, 5% draining, 5% launching), 100,000 jobs and 50 pools, on one core; the target is at most 50 ms and 256 MB a cycle:" \
    ./planner BenchmarkPlan 1 3
  gobench "One control cycle of the live controller for 10,000 eight-GPU nodes in four pools, every agent's report fresh and holding a job, with two weeks of demand history (settle the journal, observe the clouds and agents, record the demand with a synced write, forecast, plan, commit, act), on one core; the target is under 100 ms:" \
    ./controller 'BenchmarkCycle$' 1 3
  gobenchx "Who used what, at 10,000 ten-GPU nodes running 100,000 jobs of ten teams (each job checkpointing every 15 minutes): each cycle without it, then the charging of its result (\`keepUsage\`), timed apart in one run on two cores; the target is under 10% of the cycle (\`added-%\`):" \
    ./controller 'BenchmarkCycleUsage$' '-benchtime 60x -count 3'
  gobenchx "The report of who used what over 30 days of a state file's records (100,000 job records, and an hour of each of 10 teams in 3 tiers on 4 pools for every hour), by team and by job; the target is under 1 s:" \
    ./controller 'BenchmarkUsageReport$' '-benchtime 10x -count 3'
  gobench "\`simulate\` on the whole Philly trace (111,549 jobs over 129 days), the five default policies side by side on two cores; the target is at most 10 s and 1 GB:" \
    ./simulate 'BenchmarkSimulatePhilly$' 2 1
  gobench "Choosing a forecast model and forecasting (\`auto\`) on 14 days of 10-minute data and on 90 days of 1-minute data, on one core; the targets are 20 ms and 500 ms:" \
    ./forecast BenchmarkAuto 1 3
  gobench "The agent's reading of 8 GPUs through NVML (go-nvml's mock DGX H100, NVML's own time excluded), on one core:" \
    ./agent/gpu BenchmarkRead 1 3
  gobench "The agent's whole sample: 8 GPUs read as above, a report built with 8 jobs and encoded, on one core; the target is 0.5% of a core at one sample a second (5 ms a sample):" \
    ./agent BenchmarkSample 1 3
  gobench "The controller taking agents' reports of 8 GPUs (1.4 KB), in process, on one and two cores; the target is 20,000 a second on two:" \
    ./controller/reports BenchmarkReceiver 1,2 3
  # The agent's memory: resident after 5 s of one-second samples without
  # GPUs, reporting to a controller that refuses connections.
  # Its socket and marker in the scratch folder, not /run/fleetcast.
  tok=$scratch/token
  (umask 077 && echo 0123456789abcdef0123 >"$tok")
  bin/autoscaler-agent -no-gpu -interval 1s -metrics '' -state '' -notices none \
    -socket "$scratch/agent.sock" -marker "$scratch/draining" \
    -controller http://127.0.0.1:1 -token-file "$tok" -node n1 >"$scratch/agent.log" 2>&1 &
  agent=$!
  sleep 5
  if ! kill -0 "$agent" 2>/dev/null; then
    echo "bench: the agent exited before its memory was read:" >&2
    cat "$scratch/agent.log" >&2
    exit 1
  fi
  rss=$(awk '/^VmRSS/ {printf "%.0f MB", $2/1024}' "/proc/$agent/status")
  kill "$agent"; wait "$agent" 2>/dev/null || true
  agent=
  {
    echo "The agent's memory, resident (VmRSS) after 5 s of one-second samples without GPUs, reporting to a controller that refuses connections; the target is 30 MB (the agent's binary is $(du -m bin/autoscaler-agent | cut -f1) MB, from make build; NVML's library adds its share on a GPU machine):"
    echo
    echo '```text'
    echo "\$ autoscaler-agent -no-gpu -interval 1s -metrics '' -state '' -notices none -socket DIR/agent.sock -marker DIR/draining -controller http://127.0.0.1:1 -token-file FILE -node n1"
    echo "VmRSS after 5 s: $rss"
    echo '```'
    echo
  } >>"$out"
  if [ "${BENCH_ALL:-0}" = 1 ]; then
    go test -run '^$' -bench . -benchmem -cpu 1 ./...
  fi
else
  echo "(Left out of this run: \`BENCH_GO=0\`.)" >>"$out"
  echo >>"$out"
fi

traces=${TRACES:-../shared/traces}
if [ ! -d "$traces" ]; then
  echo "(No shared traces at \`$traces\` when this page was made: no simulations.)" >>"$out"
  publish
  echo "bench: no traces at $traces; $page has the Go benchmarks alone" >&2
  exit 0
fi

# series is where the shared benchmark series are, beside the traces.
series=${SERIES:-$traces/../bench/series}
philly=$traces/philly_rfold/philly_trace.csv
helios=$traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv
servegen=$series/servegen_msmall_10m.csv
heliosFlags=(-value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc)

# shown is how the page names a trace: from the repository's root.
shown() {
  case $1 in
    "$series"/*) echo "../shared/bench/series/${1#"$series"/}" ;;
    "$traces"/*) echo "../shared/traces/${1#"$traces"/}" ;;
    *) echo "$1" ;;
  esac
}

# timed CONFIG TRACE [FLAGS]: simulate's wall clock time and peak memory.
timed() {
  local config=$1 trace=$2; shift 2
  [ -f "$trace" ] || return 0
  /usr/bin/time -v bin/autoscaler simulate -config "$config" -trace "$trace" "$@" >/dev/null 2>"$out.err"
  {
    echo "\$ /usr/bin/time -v autoscaler simulate -config $config -trace $(shown "$trace")${*:+ $*}"
    grep -E 'Elapsed \(wall clock\)|Maximum resident set size' "$out.err"
  } >>"$out"
}

if [ -f "$philly" ]; then
  {
    echo "\`simulate\` as a command, the same five policies, and \`-frontier\` (14 or 15 runs); the targets are 10 s and 60 s:"
    echo
    echo '```text'
  } >>"$out"
  timed examples/philly-fair.hcl "$philly"
  timed examples/philly-fair.hcl "$philly" -frontier
  echo '```' >>"$out"
fi
echo >>"$out"

cat >>"$out" <<'EOF'
## Forecast accuracy

Every model backtested on the shared series with the protocol of `../shared/bench` (30 rolling
origins, a 14-day training window, 7 days for ServeGen; MASE and pinball loss scaled by the
in-sample seasonal-naive error; coverage of the 10%-90% band); `auto` is the one the controller
plans on. The anchors are R's forecast package 8.20 on the same origins, measured once with
`Rscript ../shared/bench/forecast_anchors.R series/NAME.csv 144 H 30 DAYS` (`make bench` does not
run R; the MASE anchors are also in `../shared/bench/scorecard.sh`): the best of its models' MASE is
0.135 (ets) for Earth an hour ahead, 0.362 (stlf) four hours ahead, 0.132 (auto.arima) for Philly an
hour ahead, 0.242 (ets) four hours ahead, and 1.350 (auto.arima) for ServeGen an hour ahead; its
best pinball loss 0.041, 0.089, 0.041, 0.095 and 0.394.

EOF
# backtest NAME HORIZON [FLAGS]: one series' backtest table.
backtest() {
  local name=$1 horizon=$2; shift 2
  local file=$series/$name.csv
  [ -f "$file" ] || { echo "bench: $file missing, skipped" >&2; return; }
  {
    echo '```text'
    echo "\$ autoscaler forecast -series $(shown "$file") -value-column value -step 10m -horizon $horizon -backtest${*:+ $*}"
    bin/autoscaler forecast -series "$file" -value-column value -step 10m -horizon "$horizon" -backtest "$@"
    echo '```'
    echo
  } >>"$out"
}
backtest earth_demand_10m 1h
backtest earth_demand_10m 4h
backtest philly_busy_10m 1h
backtest philly_busy_10m 4h
backtest servegen_msmall_10m 1h -train 7d

cat >>"$out" <<'EOF'
## Simulations on the shared traces

Each table compares the policies on one trace, with the same reservations and prices: `static`
(sized for the peak), `reactive` (Cluster Autoscaler's defaults: scale up on pending jobs, down a node
under 50% GPU allocation for 10 minutes), `headroom` (reactive plus 128 GPUs kept free in node-wide placeholders, the
overprovisioning practice), `predictive` (Fleetcast) and `oracle` (knows the future).

EOF

# run TITLE CONFIG TRACE [FLAGS]: one simulate table; with -frontier among
# the flags, its picture too (docs/img/frontier-NAME.svg once published).
run() {
  local title=$1 config=$2 trace=$3; shift 3
  [ -f "$trace" ] || { echo "bench: $trace missing, skipped" >&2; return; }
  local t0 t1 table pic="" flags=("$@")
  if [[ " $* " == *" -frontier "* ]]; then
    pic=img/frontier-$(basename "$trace" .csv | cut -d_ -f1).svg
    mkdir -p "$scratch/img"
    flags+=(-plot "$scratch/$pic")
    set -- "$@" -plot "docs/$pic"
  fi
  t0=$(date +%s.%N)
  table=$(bin/autoscaler simulate -config "$config" -trace "$trace" "${flags[@]}")
  t1=$(date +%s.%N)
  {
    echo "$title ($(awk "BEGIN{printf \"%.1f\", $t1-$t0}") s, the script's clock):"
    echo
    echo '```text'
    echo "\$ autoscaler simulate -config $config -trace $(shown "$trace")${*:+ $*}"
    echo "$table"
    echo '```'
    echo
    [ -z "$pic" ] || { echo "![$title]($pic)"; echo; }
  } >>"$out"
}

run "Philly (Microsoft's GPU training cluster, 111,549 jobs over 129 days), the fair pools" examples/philly-fair.hcl "$philly"
run "Helios Earth (SenseTime, per-minute running + pending GPUs, 31 days)" examples/local.hcl "$helios" "${heliosFlags[@]}"
run "ServeGen m-small (Alibaba Bailian, requests/s every 10 minutes over 14 days, one GPU per 10 requests/s)" examples/local.hcl "$servegen" -scale 0.1
# A burst that comes once: whether capacity is released after it. The series
# is synthetic (scripts/one-off-burst.py) and kept in examples/, not a shared trace.
run "A burst that comes once (synthetic, from scripts/one-off-burst.py: a daily cycle of 100-300 GPUs and 300 more for two hours on day 8), the three days from day 7" examples/local.hcl examples/one-off-burst-10m.csv -from 7d -days 3 -policies reactive,headroom,predictive,perfect,oracle

cat >>"$out" <<'EOF'
## Cost against waiting: the frontiers

Each frontier runs `headroom` over buffers of 0 to 512 GPUs, `predictive` at quantiles p50 to p99
and by cost, and the `perfect` ablation (the planner fed the true future demand) at margins of 0,
5, 10 and 20%; its last lines read predictive's and perfect's frontiers at each buffer's waiting.

EOF
margins=0,0.05,0.1,0.2
run "Philly frontier, with the perfect ablation" examples/philly-fair.hcl "$philly" -frontier -perfect-margin "$margins"
run "Helios Earth frontier, with the perfect ablation" examples/local.hcl "$helios" "${heliosFlags[@]}" -frontier -perfect-margin "$margins"
run "ServeGen m-small frontier, with the perfect ablation" examples/local.hcl "$servegen" -scale 0.1 -frontier -perfect-margin "$margins"

cat >>"$out" <<'EOF'
## Announced demand: the sensitivity

Philly with a share of its jobs announced by their scheduler 30 minutes ahead (`-announce-share`).

EOF
for share in 0.25 0.5 1; do
  run "Philly, a share of $share of the jobs announced 30 minutes ahead" examples/philly-fair.hcl "$philly" -policies reactive,predictive,oracle -announce-share "$share"
done

cat >>"$out" <<'EOF'
## Runtime estimates: the sensitivity

Philly with the scheduler telling running jobs' ends (`-runtime-estimates`): exactly, or as time
limits that overestimate them.

EOF
for est in exact limits; do
  run "Philly, the scheduler telling running jobs' ends: $est" examples/philly-fair.hcl "$philly" -policies reactive,predictive,oracle -runtime-estimates "$est"
done

cat >>"$out" <<'EOF'
## The reservation advice against hindsight

The baseline advice followed over the trace, against every fixed reservation (`-advice-check`).

EOF
run "Philly, the advice against fixed reservations" examples/philly-fair.hcl "$philly" -advice-check
run "Helios Earth, the advice against fixed reservations" examples/local.hcl "$helios" "${heliosFlags[@]}" -advice-check
run "ServeGen m-small, the advice against fixed reservations (14 days: first reviewed after 7)" examples/local.hcl "$servegen" -scale 0.1 -advice-check -advice-after 7d

# One trailing newline, as every page.
sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$out"
publish
echo "bench: $page written" >&2
