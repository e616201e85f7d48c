#!/bin/bash
# A run longer than one device call: it starts detached and the calls that follow back to
# back (the machine stays warm between them) wait for it.
#
#   bash tools/gpu-host/detached.sh start NAME SCRIPT   copy the checkout to /tmp/bg/NAME/tree
#                 and run SCRIPT there under setsid, OUT=/tmp/bg/NAME/out, log /tmp/bg/NAME/log
#   bash tools/gpu-host/detached.sh wait NAME SECONDS   wait until it ends or SECONDS pass;
#                 once it ended, copy /tmp/bg/NAME/out and the log into this call's $OUT
set -u
[ $# -ge 3 ] || { echo "usage: detached.sh start NAME SCRIPT | wait NAME SECONDS" >&2; exit 2; }
cmd=$1 name=$2
d=/tmp/bg/$name
case $cmd in
start)
	rm -rf "$d" && mkdir -p "$d/out"
	cp -a . "$d/tree"
	(cd "$d/tree" && OUT=$d/out setsid nohup bash "$3" >"$d/log" 2>&1 </dev/null &)
	echo "started $name in $d"
	;;
wait)
	# setsid forks, so no pid of ours is the run's: it is what still runs from its tree
	end=$((SECONDS + $3))
	while pgrep -f "$d/tree" >/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
	if pgrep -f "$d/tree" >/dev/null; then
		echo "RUNNING after $3 s"
	else
		sleep 2
		echo "ENDED"
		cp -a "$d/out/." "${OUT:?}/" 2>/dev/null
		cp "$d/log" "$OUT/detached.log"
	fi
	tail -25 "$d/log"
	;;
*)
	echo "usage: detached.sh start NAME SCRIPT | wait NAME SECONDS" >&2
	exit 2
	;;
esac
