#!/bin/sh
# racks.sh: the commands of a fleetcast-commands pool, as one script:
#   racks.sh list              print the pool's servers and power states
#   racks.sh power-on  NAME... power servers on  (launch_command)
#   racks.sh power-off NAME... power servers off (terminate_command)
#   racks.sh verify NAME       check the identity NAME's agent presents,
#                              on stdin (verify_command)
#
# This one keeps each server's power state in a file, one per server, in
# the directory its pool's target block names (rack_dir = "..."), so it
# can be tried, and tested, without hardware. On real servers, replace
# the three cases with the BMC's commands, such as
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power status
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power on
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power soft
# or Slurm's `scontrol show nodes`, ResumeProgram and SuspendProgram.
# Here a server's identity is a secret set when it was provisioned, kept
# in $rack_dir/.identity/NAME; on real servers, check a signature made
# with the server's host key or TPM instead.
#
# It uses only the shell's built-ins: the plugin gives the commands its
# own environment (the plugin block's env), with no PATH unless set there.
set -eu
dir=${FLEETCAST_TARGET_RACK_DIR:?set rack_dir in the pool target block}
cmd=${1:?list, power-on, power-off or verify}
shift
case $cmd in
list)
	printf '{"nodes": ['
	sep=
	for f in "$dir"/*; do
		[ -e "$f" ] || continue # an empty rack: the glob itself
		# A server whose state cannot be read fails the listing: left
		# out, it would count as gone.
		state=
		read -r state < "$f" || [ -n "$state" ] || { echo "cannot read $f" >&2; exit 1; }
		# Where a server is reached, if known ($rack_dir/.address/NAME): a
		# pool of Slurm nodes has Slurm reach its node there.
		address=
		[ ! -f "$dir/.address/${f##*/}" ] || read -r address < "$dir/.address/${f##*/}" || true
		if [ -n "$address" ]; then
			printf '%s{"name": "%s", "state": "%s", "address": "%s"}' "$sep" "${f##*/}" "$state" "$address"
		else
			printf '%s{"name": "%s", "state": "%s"}' "$sep" "${f##*/}" "$state"
		fi
		sep=', '
	done
	printf ']}\n'
	;;
power-on)
	for name in "$@"; do
		[ -f "$dir/$name" ] || { echo "no server $name in $dir" >&2; exit 1; }
		echo on > "$dir/$name"
	done
	;;
power-off)
	for name in "$@"; do
		[ -f "$dir/$name" ] || { echo "no server $name in $dir" >&2; exit 1; }
		echo off > "$dir/$name"
	done
	;;
verify)
	name=${1:?the server}
	[ -f "$dir/$name" ] && [ -f "$dir/.identity/$name" ] || { echo "no identity on record for $name" >&2; exit 1; }
	read -r want < "$dir/.identity/$name"
	read -r got || true
	[ -n "$want" ] && [ "$got" = "$want" ] || { echo "$name presented an identity that is not its own" >&2; exit 1; }
	;;
*)
	echo "unknown command $cmd: want list, power-on, power-off or verify" >&2
	exit 2
	;;
esac
