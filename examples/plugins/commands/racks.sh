#!/bin/sh
# racks.sh: the commands of a fleetcast-commands pool, as one script:
#   racks.sh list              print the pool's servers and power states
#   racks.sh power-on  NAME... power servers on  (launch_command)
#   racks.sh power-off NAME... power servers off (terminate_command)
#
# This one keeps each server's power state in a file, one per server, in
# the directory its pool's target block names (rack_dir = "..."), so it
# can be tried, and tested, without hardware. On real servers, replace
# the three cases with the BMC's commands, such as
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power status
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power on
#   ipmitool -I lanplus -H "$name-bmc" -U admin -E chassis power soft
# or Slurm's `scontrol show nodes`, ResumeProgram and SuspendProgram.
#
# It uses only the shell's built-ins: the plugin gives the commands its
# own environment (the plugin block's env), with no PATH unless set there.
set -eu
dir=${FLEETCAST_TARGET_RACK_DIR:?set rack_dir in the pool target block}
cmd=${1:?list, power-on or power-off}
shift
case $cmd in
list)
	printf '{"nodes": ['
	sep=
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		read -r state < "$f"
		printf '%s{"name": "%s", "state": "%s"}' "$sep" "${f##*/}" "$state"
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
*)
	echo "unknown command $cmd: want list, power-on or power-off" >&2
	exit 2
	;;
esac
