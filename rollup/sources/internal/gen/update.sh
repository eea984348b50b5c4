#!/bin/sh
# Regenerates ../../data/referers.txt (run by `go generate ./rollup/sources`).
#
# By default the input is referers.yml from Debian's ruby-referer-parser
# package, taken with Debian's package client (apt-get download; nothing is
# installed). To build from another copy of the Snowplow database, e.g. a
# newer one placed in the project's shared folder:
#
#   REFERERS_YML=/path/to/referers.yml REFERERS_FROM="what it is" go generate ./rollup/sources
set -eu
cd "$(dirname "$0")/../.." # rollup/sources

if [ -n "${REFERERS_YML:-}" ]; then
	: "${REFERERS_FROM:?set REFERERS_FROM to say where $REFERERS_YML came from}"
	go run ./internal/gen -in "$REFERERS_YML" -from "$REFERERS_FROM" -out data/referers.txt
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download ruby-referer-parser >/dev/null 2>&1) || {
	echo "update.sh: apt-get download ruby-referer-parser failed (run apt-get update first?)" >&2
	exit 1
}
deb=$(ls "$tmp"/*.deb)
dpkg-deb -x "$deb" "$tmp/x"
yml=$(find "$tmp/x" -name referers.yml | head -n 1)
[ -n "$yml" ] || { echo "update.sh: no referers.yml in $deb" >&2; exit 1; }
version=$(dpkg-deb -f "$deb" Version)
sum=$(sha256sum "$yml" | cut -d' ' -f1)
go run ./internal/gen -in "$yml" \
	-from "referers.yml of Debian package ruby-referer-parser $version (sha256 $sum)" \
	-out data/referers.txt
