#!/bin/sh
# Builds bin/waymark and the redirect benchmark, then runs it. Every argument
# goes to redirectbench, for example:
#
#   bench/run.sh                                   # 100k links, 3 rounds of 10 s
#   bench/run.sh -links 10000 -duration 3s -rounds 1
#   bench/run.sh -aa                               # baseline vs baseline: noise floor
#   bench/run.sh -url http://127.0.0.1:8080 -api-key-file data/dev-api-key
#
# Results go to bench/out/redirect.json (ignored by git) unless -out is given.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p bench/out
go build -o bench/out/redirectbench ./bench/cmd/redirectbench

# -url and -aa need no node binary; otherwise build and pass it.
node_flag="-waymark bin/waymark"
for arg in "$@"; do
	case "$arg" in
	-url | --url | -url=* | --url=* | -aa | --aa | -waymark | --waymark | -waymark=* | --waymark=*) node_flag="" ;;
	esac
done
if [ -n "$node_flag" ]; then
	go build -o bin/waymark ./cmd/waymark
fi
# shellcheck disable=SC2086 # node_flag is two words on purpose
exec bench/out/redirectbench $node_flag -out bench/out/redirect.json "$@"
