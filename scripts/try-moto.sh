#!/usr/bin/env bash
# Try Fleetcast's AWS side without an AWS account, on a local moto_server
# (pip install 'moto[server]'): it makes what examples/terraform/aws would
# (the launch templates and the three tagged Auto Scaling groups, plus the
# H100 capacity block's launch template), then runs, against
# examples/aws.hcl (the runs on a copy whose certificate, secrets and state
# are made in a temporary directory):
#
#   1. autoscaler plan                      what it would do;
#   2. autoscaler run -dry-run -for 1ms     one cycle that changes nothing;
#   3. autoscaler run                       the controller, with demand pushed
#                                           to its API, until it raises a
#                                           group's desired capacity (its
#                                           second cycle, a minute in).
#
# Needs only Go (with the C compiler every build of the autoscaler needs)
# and moto_server: no AWS CLI, no curl. It takes about a minute and a half.
# moto_server listens on a free 127.0.0.1 port, or on MOTO_PORT; it, the
# controller and the temporary directory are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
fail() { printf 'try-moto: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || fail "go is not installed"
cc=$(go env CC)
command -v "${cc%% *}" >/dev/null || fail "no C compiler ($cc): the autoscaler's NVML bindings use cgo; install gcc"
command -v moto_server >/dev/null || fail "moto_server is not installed: pip install 'moto[server]'"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fleetcast-try-moto.XXXXXX")
moto_pid="" run_pid=""
cleanup() {
  local code=$?
  for pid in "$run_pid" "$moto_pid"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [ "$code" -ne 0 ] && [ -s "$tmp/moto.log" ]; then
    printf '\ntry-moto: failed; the last of moto_server'\''s log:\n' >&2
    tail -n 20 "$tmp/moto.log" >&2
  fi
  rm -rf "$tmp"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "Building the autoscaler and the helper that talks to moto (scripts/trymoto) into $tmp"
# As the Makefile does: NVIDIA's cgo prologue uses functions its header marks deprecated.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
go build -o "$tmp/autoscaler" ./cmd/autoscaler
go build -o "$tmp/trymoto" ./scripts/trymoto
autoscaler="$tmp/autoscaler" trymoto="$tmp/trymoto"

port=${MOTO_PORT:-$("$trymoto" free-port)}
unset MOTO_PORT # moto_server reads it too; the port is given with -p
[[ $port =~ ^[0-9]+$ ]] || fail "MOTO_PORT=$port: want a port number"
step "Starting moto_server on 127.0.0.1:$port (its log: $tmp/moto.log)"
moto_server -H 127.0.0.1 -p "$port" >"$tmp/moto.log" 2>&1 &
moto_pid=$!

# Every AWS call, the autoscaler's and the helper's, goes to moto, with
# made-up credentials; nothing from ~/.aws is read.
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export AWS_ACCESS_KEY_ID=fleetcast-try-moto AWS_SECRET_ACCESS_KEY=fleetcast-try-moto AWS_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_PROFILE
"$trymoto" wait "$AWS_ENDPOINT_URL/moto-api/" "$moto_pid"

step "Creating what examples/terraform/aws makes (its variables' defaults), tagged fleetcast/managed and fleetcast/pool"
"$trymoto" create

step "autoscaler plan -config examples/aws.hcl"
"$autoscaler" plan -config examples/aws.hcl

# examples/aws.hcl keeps its state in /var/lib/fleetcast, its TLS
# certificate and secrets in /etc/fleetcast, and listens on :8790; here a
# copy points at a CA, certificate and secrets made in the temp directory,
# and the API listens on a free port of 127.0.0.1. Everything else is the
# example as it is.
conf=$("$trymoto" local-config examples/aws.hcl "$tmp")
api_port=$("$trymoto" free-port)
step "autoscaler run -config examples/aws.hcl -dry-run -for 1ms (one cycle; the copy in $conf, state in $tmp/dry-run)"
"$autoscaler" run -config "$conf" -dry-run -for 1ms -state-dir "$tmp/dry-run" -listen "127.0.0.1:$api_port"
"$trymoto" unchanged

step "autoscaler run -config examples/aws.hcl (state in $tmp/state, API on https://127.0.0.1:$api_port)"
echo "    A cycle at start, then every minute (controller.interval). Nothing reports"
echo "    for the nodes here, so the script pushes 80 GPUs of pending demand, more"
echo "    than the reserved nodes hold: the second cycle buys the rest in a group."
"$autoscaler" run -config "$conf" -for 5m -state-dir "$tmp/state" -listen "127.0.0.1:$api_port" &
run_pid=$!
"$trymoto" demand "https://127.0.0.1:$api_port" "$tmp/state/api-token" aws-ondemand-a100 80 "$tmp/ca.pem"
"$trymoto" wait-scaled 150s

step "Stopping the controller (SIGTERM: it finishes the cycle in progress)"
kill -TERM "$run_pid"
status=0
wait "$run_pid" || status=$?
run_pid=""
[ "$status" -eq 0 ] || fail "the controller exited with status $status"

step "Done: plan, a dry run and a live run against examples/aws.hcl on moto_server"
