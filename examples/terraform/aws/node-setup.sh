#!/bin/bash
# Joins this instance to a Fleetcast pool: installs the agent (checked
# against its SHA-256), names the node by its instance ID, writes the
# agent's unit and starts it. The agent then bootstraps: it presents the
# fleet's bootstrap secret with the instance identity document AWS signed,
# and the controller, having checked both and that the instance is a live
# member of a managed pool, issues the node its own credential.
#
# The Terraform's user data runs it as root on first boot (after putting
# the bootstrap secret and the controller's CA in place); tests run the
# same file against AWS's metadata mock, with their own --root and
# --service-manager exec.
#
# Usage: node-setup.sh --controller URL --pool NAME --agent-url URL --agent-sha256 HEX
#          --bootstrap-token-file FILE --ca-file FILE
#          [--metadata-url URL] [--root DIR] [--service-manager systemd|exec|none]
#          [--agent-flags "FLAGS"]
set -euo pipefail

metadata_url=http://169.254.169.254
root=/
service_manager=systemd
controller="" pool="" agent_url="" agent_sha256="" bootstrap_file="" ca_file="" agent_flags=""

usage() {
  sed -n '/^# Usage:/,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in -h|--help) usage ;; esac
  [ $# -ge 2 ] || { echo "node-setup: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --metadata-url) metadata_url="$2" ;;
    --root) root="$2" ;;
    --service-manager) service_manager="$2" ;;
    --controller) controller="$2" ;;
    --pool) pool="$2" ;;
    --agent-url) agent_url="$2" ;;
    --agent-sha256) agent_sha256="$2" ;;
    --bootstrap-token-file) bootstrap_file="$2" ;;
    --ca-file) ca_file="$2" ;;
    --agent-flags) agent_flags="$2" ;;
    *) echo "node-setup: unknown argument $1" >&2; usage ;;
  esac
  shift 2
done
for v in controller pool agent_url agent_sha256 bootstrap_file ca_file; do
  [ -n "${!v}" ] || { echo "node-setup: --${v//_/-} is required" >&2; usage; }
done
case "$service_manager" in systemd|exec|none) ;; *) echo "node-setup: --service-manager $service_manager: want systemd, exec or none" >&2; exit 2 ;; esac
root="${root%/}"

log() { echo "fleetcast: $*" >&2; }
command -v curl >/dev/null || { log "curl is needed (to fetch the agent and read the metadata service)"; exit 1; }
command -v sha256sum >/dev/null || { log "sha256sum is needed (to check the agent)"; exit 1; }

# sd_quote quotes one argument for a systemd unit's ExecStart: in double
# quotes, with \ and " escaped, and % and $ doubled (systemd's specifiers
# and variables), so the unit runs exactly the command exec would.
sd_quote() {
  local a=$1
  a=${a//\\/\\\\}
  a=${a//\"/\\\"}
  a=${a//%/%%}
  a=${a//\$/\$\$}
  printf '"%s"' "$a"
}

# retry runs a command until it succeeds, at most 10 times, backing off.
retry() {
  local attempt
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    "$@" && return 0
    log "attempt $attempt of '$1' failed"
    sleep $((attempt * 3))
  done
  return 1
}

etc="$root/etc/fleetcast"
bin="$root/usr/local/bin/autoscaler-agent"
install -d -m 0700 "$etc" "$root/var/lib/fleetcast"
install -d -m 0755 "$root/usr/local/bin" "$root/run/fleetcast"

# The group whose members may use the agent's local API: the agent makes
# its socket root:fleetcast, mode 0660, when the group exists, and root's
# alone otherwise. Jobs' users must be in it to register
# (usermod -aG fleetcast USER).
if ! command -v groupadd >/dev/null; then
  log "groupadd is missing: no fleetcast group, so only root's jobs can register with the agent"
elif [ -z "$root" ]; then
  groupadd --force --system fleetcast
elif [ -f "$root/etc/group" ]; then
  groupadd --force --system --prefix "$root" fleetcast
else
  log "no $root/etc/group: no fleetcast group, so only root's jobs can register with the agent"
fi

# The bootstrap secret and the controller's CA, where the agent reads them.
[ -s "$bootstrap_file" ] || { log "the bootstrap secret $bootstrap_file is missing or empty"; exit 1; }
if [ "$bootstrap_file" != "$etc/bootstrap-token" ]; then
  install -m 0600 "$bootstrap_file" "$etc/bootstrap-token"
fi
chmod 0600 "$etc/bootstrap-token"
if [ "$ca_file" != "$etc/controller-ca.pem" ]; then
  install -m 0644 "$ca_file" "$etc/controller-ca.pem"
fi

# The agent: the autoscaler-agent binary, checked against its published SHA-256.
if ! echo "$agent_sha256  $bin" | sha256sum --check --status 2>/dev/null; then
  download="$(mktemp)"
  retry curl --fail --silent --show-error --location --output "$download" "$agent_url"
  if ! echo "$agent_sha256  $download" | sha256sum --check --status; then
    log "the agent from $agent_url does not have SHA-256 $agent_sha256; refusing it"
    rm -f "$download"
    exit 1
  fi
  install -m 0755 "$download" "$bin"
  rm -f "$download"
fi

# The node's name as the controller knows it: the instance ID (IMDSv2).
imds="$(retry curl --fail --silent --show-error -X PUT "$metadata_url/latest/api/token" \
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')"
node="$(retry curl --fail --silent --show-error -H "X-aws-ec2-metadata-token: $imds" \
  "$metadata_url/latest/meta-data/instance-id")"
[ -n "$node" ] || { log "the metadata service gave no instance ID"; exit 1; }
log "node $node joins pool $pool at $controller"

# The agent's command. Its credential (-token-file) does not exist yet: the
# agent bootstraps it, and bootstraps again if the controller revokes it.
args=(-controller "$controller" -node "$node" -pool "$pool"
  -token-file "$etc/credential" -bootstrap-token-file "$etc/bootstrap-token"
  -ca-file "$etc/controller-ca.pem" -identity aws -imds-endpoint "$metadata_url"
  -notices aws -state "$root/var/lib/fleetcast/agent-state.json"
  -socket "$root/run/fleetcast/agent.sock" -marker "$root/run/fleetcast/draining" -log-level info)
# Extra flags are words split at blanks (never glob-expanded).
set -f
# shellcheck disable=SC2206
args+=($agent_flags)
set +f
printf 'NODE=%s\n' "$node" >"$etc/agent.env"

unit="$root/etc/systemd/system/fleetcast-agent.service"
install -d -m 0755 "$(dirname "$unit")"
exec_start="$(sd_quote "$bin")"
for a in "${args[@]}"; do exec_start+=" $(sd_quote "$a")"; done
cat >"$unit" <<UNIT
[Unit]
Description=Fleetcast agent (pool ${pool//%/%%})
Documentation=https://github.com/fleetcast/autoscaler/blob/main/examples/terraform/aws/README.md#on-each-node
Wants=network-online.target
After=network-online.target nvidia-persistenced.service

[Service]
Type=simple
# The agent's status line (systemctl status fleetcast-agent) says whether
# it reports, and if not, why: a refused bootstrap names the check.
NotifyAccess=main
ExecStart=$exec_start
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT

case "$service_manager" in
  systemd)
    systemctl daemon-reload
    # --no-block: cloud-init runs during boot; the unit starts when its ordering allows.
    systemctl enable --now --no-block fleetcast-agent.service
    log "fleetcast-agent.service started; journalctl -u fleetcast-agent shows it"
    ;;
  exec)
    exec "$bin" "${args[@]}"
    ;;
  none)
    log "not started (--service-manager none): $bin ${args[*]}"
    ;;
esac
