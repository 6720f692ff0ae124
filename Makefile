# The two commands of the README:
#   make run    build sluice and run its main job on embedded defaults
#   make test   install what the tests need and run the whole suite
GO        ?= go
BIN       ?= bin/sluice
LAKE      ?= ./data
CORPUS    ?= ../shared/corpus/otlp
BENCHTIME ?= 2s
BENCH     ?= .
STAMP     := $(shell date -u +%Y%m%dT%H%M%SZ)
# sluice's one version (internal/version): what --version prints and Parquet
# footers carry; empty leaves it to the module/VCS version Go stamps.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: build run ingest-corpus test race bench clean

build:
	$(GO) build -ldflags "-X github.com/sluice-dev/sluice/internal/version.override=$(VERSION)" -o $(BIN) ./cmd/sluice

# The main job on its embedded defaults: OTLP gRPC on localhost:4317, HTTP on
# localhost:4318, lake and SQLite catalog in ./data, metrics on localhost:9464.
run: build
	$(BIN) run --lake $(LAKE)

# Load the real OTLP corpus into the lake and list it.
ingest-corpus: build
	$(BIN) ingest --lake $(LAKE) $(CORPUS)
	$(BIN) lake ls --lake $(LAKE) --summary

test:
	./scripts/test.sh

# The whole suite under the race detector, the end-to-end tests against a
# sluice built with it (a process that raced exits 66): about three times as
# long as make test, so not part of it.
race:
	SLUICE_TEST_RACE=1 ./scripts/test.sh

# Every benchmark on one core, with CPU and allocation profiles per package
# under bench-profiles/<timestamp>-<package>-{cpu,mem}.prof.
bench:
	@mkdir -p bench-profiles
	@for pkg in $$($(GO) list ./... ); do \
	  if ls $$($(GO) list -f '{{.Dir}}' $$pkg)/*_test.go >/dev/null 2>&1 && \
	     grep -qs '^func Benchmark' $$($(GO) list -f '{{.Dir}}' $$pkg)/*_test.go; then \
	    name=$$(echo $$pkg | sed 's|.*/internal/||; s|/|-|g'); \
	    echo "== $$pkg"; \
	    GOMAXPROCS=1 $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem \
	      -cpuprofile bench-profiles/$(STAMP)-$$name-cpu.prof \
	      -memprofile bench-profiles/$(STAMP)-$$name-mem.prof \
	      -o bench-profiles/$(STAMP)-$$name.test $$pkg || exit 1; \
	  fi; \
	done
	@echo "profiles in bench-profiles/$(STAMP)-*.prof (go tool pprof -top bench-profiles/<file>)"

clean:
	rm -rf bin bench-profiles
