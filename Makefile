# Fleetcast. `make test` is what CI runs (through .ci/run).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
FUZZTIME ?= 30s
# go-nvml's cgo prologue uses NVML functions the header marks deprecated:
# without this gcc prints some 150 lines of warnings on a first build of
# the agent (or of the tests). Go has no per-module setting for it, so
# every build the docs give goes through make.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build controller agent run test bench lint fuzz mutants proto release image clean

all: lint test build

## build: bin/autoscaler (the controller and its tools, without cgo) and
## bin/autoscaler-agent (the node's agent, with cgo for NVML), for this machine
build: controller agent

## controller: bin/autoscaler alone
controller:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/autoscaler ./cmd/autoscaler

## agent: bin/autoscaler-agent alone
agent:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/autoscaler-agent ./cmd/autoscaler-agent

## release: both binaries for linux/amd64 and linux/arm64, their tarballs and
## SHA256SUMS in dist/; the agent runs on glibc 2.28 or later
## (scripts/release/release.sh; arm64 needs gcc-aarch64-linux-gnu)
release:
	VERSION=$(VERSION) scripts/release/release.sh

## image: the controller's container image from scratch, from dist/'s
## binary for this machine (scripts/release/image.sh; make release first)
image:
	VERSION=$(VERSION) scripts/release/image.sh

## run: bin/autoscaler, then the controller on the built-in simulated
## cloud (examples/local.hcl); ARGS adds flags, e.g. make run ARGS='-for 24h'
run: controller
	bin/autoscaler run -config examples/local.hcl $(ARGS)

## test: every test, with the race detector; cmd/autoscaler takes about 5
## minutes under it, near go test's default 10-minute limit on a loaded
## machine, hence -timeout 20m
test:
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: docs/benchmarks.md and its pictures in docs/img, remade, and
## nothing else: the Go benchmarks, the agent's memory, then the backtests
## and simulations on the shared traces (scripts/bench.sh)
bench:
	scripts/bench.sh

## proto: the plugin protocol's Go code, from providers/plugin/proto/provider.proto,
## with the pinned generators (scripts/proto.sh; --install fetches them)
proto:
	scripts/proto.sh

## lint: gofmt and go vet
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## fuzz: the parsers' fuzzers (config, state snapshots, state exports, usage job records, traces, series, agent reports, spot notices, bootstrap requests, demand pushes, Prometheus range answers, imported histories, plugins' groups, the example plugin's listings, Slurm's JSON and hostlists), FUZZTIME each
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzParseState$$' -fuzztime $(FUZZTIME) ./fleet
	$(GO) test -run '^$$' -fuzz '^FuzzParseExport$$' -fuzztime $(FUZZTIME) ./state
	$(GO) test -run '^$$' -fuzz '^FuzzUsageJob$$' -fuzztime $(FUZZTIME) ./state
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./trace
	$(GO) test -run '^$$' -fuzz '^FuzzReadSeries$$' -fuzztime $(FUZZTIME) ./trace
	$(GO) test -run '^$$' -fuzz '^FuzzReceiver$$' -fuzztime $(FUZZTIME) ./controller/reports
	$(GO) test -run '^$$' -fuzz '^FuzzLocalAPI$$' -fuzztime $(FUZZTIME) ./agent
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./agent/spot
	$(GO) test -run '^$$' -fuzz '^FuzzBootstrap$$' -fuzztime $(FUZZTIME) ./nodeauth
	$(GO) test -run '^$$' -fuzz '^FuzzDemandReceiver$$' -fuzztime $(FUZZTIME) ./controller
	$(GO) test -run '^$$' -fuzz '^FuzzPrometheusRange$$' -fuzztime $(FUZZTIME) ./controller
	$(GO) test -run '^$$' -fuzz '^FuzzImportSteps$$' -fuzztime $(FUZZTIME) ./cmd/autoscaler
	$(GO) test -run '^$$' -fuzz '^FuzzGroupFromWire$$' -fuzztime $(FUZZTIME) ./providers/plugin
	$(GO) test -run '^$$' -fuzz '^FuzzParseList$$' -fuzztime $(FUZZTIME) ./examples/plugins/commands
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./slurm
	$(GO) test -run '^$$' -fuzz '^FuzzHostlist$$' -fuzztime $(FUZZTIME) ./slurm/hostlist
	$(GO) test -run '^$$' -fuzz '^FuzzParseLabelTiers$$' -fuzztime $(FUZZTIME) ./simulate

## mutants: check that the safety rules' tests fail when each rule's code is removed
## (the catalogue scripts/mutants.txt, run by scripts/mutants); ONLY=WORDS runs the
## mutants whose name contains WORDS, e.g. make mutants ONLY=halt
mutants:
	$(GO) run ./scripts/mutants -only '$(ONLY)'

clean:
	rm -rf bin dist
