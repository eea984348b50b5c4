#!/bin/sh
# The analytics benchmarks of issue 8, one after the other on one build:
# redirects with and without capture (five servers), capture at saturation,
# aggregation against ClickHouse (1 day and 30 days of events), event
# ingest against a bare 202 server (a dev node, then an edge), and 30-day queries against ClickHouse.
# Needs nginx-light, wrk, clickhouse-server and taskset (see .ci/run).
# Each writes its table to stdout and bench/out/NAME.json; the whole run
# takes about 45 minutes on two cores (querybench alone about 30).
#
#   bench/analytics.sh              # everything
#   bench/analytics.sh aggbench     # only the named benchmarks
#   bench/analytics.sh aggbench-ch querybench-ch   # issue 14's (not in the default set)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p bench/out
go build -o bin/waymark ./cmd/waymark

run() {
	name=$1
	cmd=$2
	shift 2
	echo "=== $name: $cmd $* ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
	go run "./bench/cmd/$cmd" -waymark bin/waymark -out "bench/out/$name.json" "$@"
}

want="${*:-redirectmatrix capturecheck aggbench-1d aggbench-30d eventbench eventbench-edge querybench}"
for name in $want; do
	case "$name" in
	redirectmatrix) run redirectmatrix redirectmatrix ;;
	capturecheck) run capturecheck capturecheck ;;
	aggbench-1d) run aggbench-1d aggbench -events 2000000 -days 1 ;;
	aggbench-30d) run aggbench-30d aggbench -events 2000000 ;;
	eventbench)
		# The per-site limit (1,000 events/s) raised: 64 sites would cap a
		# quiet machine's node at 64,000 events/s, below what it takes.
		run eventbench eventbench -duration 5s -rounds 3 -sites 64 -settle-timeout 60s -node-args "--ingest-site-rate 1000000"
		;;
	eventbench-edge)
		# An edge that only captures: no aggregator role, so no exactly-once
		# check; the per-site limit raised so that 64 sites do not cap it.
		run eventbench-edge eventbench -duration 5s -rounds 3 -sites 64 -check=false \
			-node-args "--role voter,edge --ingest-site-rate 1000000"
		;;
	querybench) run querybench querybench ;;
	aggbench-ch)
		# Issue 14: the same 2,000,000 events through one and two aggregators
		# with --analytics-store clickhouse, against the raw insert.
		run aggbench-ch aggbench -events 2000000 -targets node,clickhouse,node-clickhouse,node-clickhouse-2
		;;
	querybench-ch)
		# Issue 14: 30,000,000 events; a node with each analytics store and
		# ClickHouse's own SQL. Bounded: a question slower than 55 s is not
		# asked again, and the timed repetitions stop after 10 minutes.
		run querybench-ch querybench -backends pebble,clickhouse -scale 0.5 -reps 50 -reps-budget 10m -query-timeout 55s
		;;
	*)
		echo "unknown benchmark $name (want redirectmatrix, capturecheck, aggbench-1d, aggbench-30d, eventbench, eventbench-edge, querybench, aggbench-ch, querybench-ch)" >&2
		exit 2
		;;
	esac
done
