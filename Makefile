# Tributary: make run | make test | make lint | make bench | make bench-compare BASE=<rev> | make reliability | make build | make kafka-up | make kafka-down
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/tributary-cdp/tributary/platform.Version=$(VERSION)
# Every module of go.work, as a package pattern.
PATTERNS = $(shell $(GO) list -m -f '{{.Path}}/...')
# Every main package in the workspace: one binary each in bin/.
MAINS = $(shell $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' $(PATTERNS))

.PHONY: run test lint bench bench-compare reliability build kafka-up kafka-down clean

## run: the whole of Tributary in one process (embedded broker unless KAFKA_BROKERS is set).
# The binary is built, then exec'd: it is make's own child, so a SIGTERM to make (kill <pid of
# make run>) reaches it and it stops cleanly, and Ctrl-C ends it with status 0.
run:
	@mkdir -p bin
	$(GO) build -ldflags '-X github.com/tributary-cdp/tributary/platform.Version=$(VERSION)' -o bin/tributary ./devstack/cmd/tributary
	CONFIG_FILE=$${CONFIG_FILE:-deploy/config/dev.yaml} \
	WEBHOOK_ALLOW_PRIVATE=$${WEBHOOK_ALLOW_PRIVATE:-true} \
	exec bin/tributary

## test: unit, integration and end-to-end tests of every module, with -race.
test:
	scripts/test.sh

## lint: gofmt, go vet, staticcheck, module boundaries, and each module built alone (GOWORK=off).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PATTERNS)
	$(GO) tool staticcheck $(PATTERNS)
	scripts/check-imports.sh
	@for m in $$($(GO) list -m -f '{{.Dir}}'); do \
		echo "GOWORK=off go build ($${m#$(CURDIR)/})"; \
		(cd $$m && GOWORK=off GOFLAGS=-mod=readonly $(GO) build ./... && GOWORK=off GOFLAGS=-mod=readonly $(GO) vet ./... >/dev/null) || exit 1; \
	done

# BENCH_LOAD_DURATION is how long each load run of make bench lasts (docs/benchmarks.md used 60s and 30s).
BENCH_LOAD_DURATION ?= 20s

## bench: micro-benchmarks of every hot path, then the ingest load tool and the end-to-end load at 2,000 and 15,000 events/s, to an endpoint answering after 200 ms, and beside one that never answers (figures go to docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 $(PATTERNS)
	$(GO) run ./devstack/cmd/loadgen -inprocess -c 16 -d $(BENCH_LOAD_DURATION)
	$(GO) run ./devstack/cmd/e2eload -d $(BENCH_LOAD_DURATION) -rate 2000 -batch 10
	$(GO) run ./devstack/cmd/e2eload -d $(BENCH_LOAD_DURATION) -rate 15000
	$(GO) run ./devstack/cmd/e2eload -d $(BENCH_LOAD_DURATION) -rate 2000 -batch 10 -receiver-latency 200ms
	$(GO) run ./devstack/cmd/e2eload -d $(BENCH_LOAD_DURATION) -rate 5000 -neighbour hang

## bench-compare: the whole stack's end-to-end load (e2eload) of BASE and of the work tree, alternated ROUNDS times each, and the ratios head/base: webhooks/s, p99, CPU s per 1,000 webhooks, peak RSS (docs/benchmarks.md#comparing-two-builds). ARGS: e2eload's flags; MAKE_RUN=1: each build's make run; BASE_ENV/HEAD_ENV: settings of each side (BASE=HEAD: one build, a setting off and on).
BASE ?= main
ROUNDS ?= 2
ARGS ?= -d 20s -rate 15000
bench-compare:
	scripts/bench-compare.sh $(BASE) $(ROUNDS) -- $(ARGS)

## reliability: the chaos harness (docs/reliability.md): every service its own process from bin/, faults injected, 0 acknowledged events lost. FULL=1: the full run; APACHE=1: on Apache Kafka (deploy/kafka); RUN=kill,hostile: some scenarios.
reliability: build
	$(GO) run ./devstack/cmd/reliability $(if $(FULL),-full) $(if $(APACHE),-apache) $(if $(RUN),-run $(RUN))

## build: static binaries in bin/.
build:
	@mkdir -p bin
	@for p in $(MAINS); do \
		echo "bin/$$(basename $$p)"; \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/$$(basename $$p) $$p || exit 1; \
	done

kafka-up:
	@deploy/kafka/kafka.sh up

kafka-down:
	@deploy/kafka/kafka.sh down

clean:
	rm -rf bin .data
