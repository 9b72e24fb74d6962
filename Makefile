# shindo — build, generate, test.
#
#   make run     build everything and start the local topology (shindo dev)
#   make test    everything CI checks: generated code, lint, vet, builds, tests
#
# Tools (buf and the protoc plugins) are pinned here and installed into
# .bin/ on first use; Go itself is the only prerequisite.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUF_VERSION          := v1.75.0
PROTOC_GEN_GO        := v1.36.12
PROTOC_GEN_GO_GRPC   := v1.6.0
GRPC_GATEWAY_VERSION := v2.33.0
GOLANGCI_LINT        := v2.15.0

TOOLS := $(CURDIR)/.bin
export PATH := $(TOOLS):$(PATH)
export GOFLAGS := -buildvcs=false

MODULES  := gen lib devkit seismo sdk web svc-ingest svc-rts svc-waveform svc-dataapi svc-edge cli e2e
SERVICES := ingest rts waveform dataapi edge
BINARIES := bin/shindo $(addprefix bin/shindo-,$(SERVICES))
# The e2e package takes 19-20 minutes here (1,150-1,201 s in CI, five
# minutes of it the chaos test; 22-23 before its waiting tests ran side by
# side); a timeout reports a hang, not a slow run, so it stays well clear.
E2E_TIMEOUT ?= 30m

.PHONY: all run build test tools generate check-generate lint breaking vet gowork-off unit e2e bench bench-wan chaos chaos-soak clean system-packages

all: build

run: build
	./bin/shindo dev $(ARGS)

build:
	@mkdir -p bin
	cd cli && go build -o ../bin/shindo ./cmd/shindo
	@for s in $(SERVICES); do \
	  (cd svc-$$s && CGO_ENABLED=0 go build -o ../bin/shindo-$$s ./cmd/shindo-$$s); \
	done
	@echo "built: $(BINARIES)"

# --- code generation ---------------------------------------------------------

$(TOOLS)/buf:
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO)

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC)

$(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 &:
	GOBIN=$(TOOLS) go install \
	  github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION) \
	  github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)

$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT)

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2

# Generated files are removed first so that a deleted proto leaves nothing
# behind.
generate: tools
	find gen -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' | xargs -r rm -f
	buf generate

# Regenerates into a scratch directory and fails on any difference with gen/.
check-generate: tools
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	buf generate -o $$tmp; \
	diff -r -q -x '*.go.mod' -x go.mod -x go.sum -x doc.go -x openapi.go $$tmp/gen gen \
	  && echo "gen/ is up to date" \
	  || { echo "gen/ differs from proto/: run 'make generate' and commit the result"; exit 1; }

# --- static checks -------------------------------------------------------------

# buf's rules for the contracts, gofmt, and golangci-lint with the
# project's habits (.golangci.yml) in every module.
lint: tools $(TOOLS)/golangci-lint
	buf lint
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && golangci-lint run ./...) || { echo "golangci-lint: $$m"; exit 1; }; done
	@echo "lint: clean"

# Compares the contracts with the last commit that changed proto/ before
# HEAD; the first such commit has nothing to compare with.
breaking: tools
	@base=$$(git log -n 1 --format=%H HEAD~1 -- proto 2>/dev/null || true); \
	if [ -n "$$base" ]; then buf breaking --against ".git#ref=$$base,subdir=proto" && echo "breaking: compatible with proto/ of $$base"; \
	else echo "breaking: no earlier version of proto/ to compare with"; fi

vet:
	@for m in $(MODULES); do (cd $$m && go vet ./...) || exit 1; done

# Every module must build on its own, without go.work; the tests below run
# that way too, so each module is also tested standalone.
gowork-off:
	@for m in $(MODULES); do (cd $$m && GOWORK=off go build ./... && GOWORK=off go vet ./...) || exit 1; done
	@echo "all modules build with GOWORK=off"

# --- tests -----------------------------------------------------------------------

# Every module's tests under the race detector, two jobs at a time (one
# module's slowest packages leave a core idle otherwise), each job's output
# printed whole once it ends, with how long it took; and beside them the RTS
# scenario simulations, which a race build leaves out (single-threaded
# numeric work it slows tenfold: svc-rts/internal/shake/scenario_test.go).
# The longest jobs are listed first, so the last to end is a short one.
UNIT_JOBS := scenarios svc-rts seismo lib svc-dataapi cli svc-edge svc-ingest devkit svc-waveform sdk gen web
unit: system-packages
	@test "$(sort $(filter-out scenarios,$(UNIT_JOBS)))" = "$(sort $(filter-out e2e,$(MODULES)))" \
	  || { echo "unit: UNIT_JOBS must list every module but e2e"; exit 1; }
	@printf '%s\n' $(UNIT_JOBS) | xargs -P 2 -I{} sh -c \
	  'start=$$(date +%s); \
	   if [ {} = scenarios ]; then out=$$(cd svc-rts && GOWORK=off go test -count=1 ./internal/shake 2>&1); \
	   else out=$$(cd {} && GOWORK=off go test -race -count=1 ./... 2>&1); fi; rc=$$?; \
	   printf "== %s (%ss)\n%s\n" {} $$(( $$(date +%s) - start )) "$$out"; exit $$rc' \
	  || { echo "unit: a module's tests failed (above)"; exit 1; }

system-packages:
	@deploy/dev/system-packages

# The end-to-end tier prints a line as each test ends and, at the end, every
# test's duration, longest first (devkit/cmd/testtimes); a failed test's log
# is printed as plain go test would, and every test's is kept in
# var/e2e-test.json.
e2e: build system-packages
	@mkdir -p var
	cd devkit && GOWORK=off go build -o $(TOOLS)/testtimes ./cmd/testtimes
	cd e2e && GOWORK=off SHINDO_BIN=$(CURDIR)/bin go test -json -count=1 -timeout $(E2E_TIMEOUT) ./... \
	  | $(TOOLS)/testtimes -json $(CURDIR)/var/e2e-test.json

# vet is left out: gowork-off vets every module on its own.
test: check-generate lint breaking gowork-off unit e2e

# shindo chaos for 5 minutes on the full topology (e2e TestChaos, also part
# of make test), alone.
chaos: build system-packages
	cd e2e && GOWORK=off SHINDO_BIN=$(CURDIR)/bin go test -count=1 -timeout 20m -run '^TestChaos$$' -v ./...

# The hour-long chaos run docs/RELIABILITY.md records: 1,000 stations, every
# kind of fault; the report is printed and kept in var/chaos-soak.json, the
# processes' logs and both cores' tick archives in var/chaos-soak/.
chaos-soak: build system-packages
	rm -rf $(CURDIR)/var/chaos-soak
	cd e2e && GOWORK=off SHINDO_BIN=$(CURDIR)/bin SHINDO_CHAOS_DURATION=60m SHINDO_CHAOS_STATIONS=1000 \
		SHINDO_CHAOS_REPORT=$(CURDIR)/var/chaos-soak.json SHINDO_CHAOS_KEEP=$(CURDIR)/var/chaos-soak \
		go test -count=1 -timeout 90m -run '^TestChaos$$' -v ./...

bench: build
	cd e2e && SHINDO_BIN=$(CURDIR)/bin go test -run XXX -bench . -benchtime 1x -timeout 30m ./...

# Station → browser latency at 1,000 stations on loopback and under shindo dev -wan, in one run
# (root: network namespaces); docs/BENCHMARKS.md records it.
bench-wan: build
	cd e2e && SHINDO_BIN=$(CURDIR)/bin go test -run '^$$' -bench '^BenchmarkSliceLatencyWAN$$' -benchtime 1x -timeout 20m ./...

clean:
	rm -rf bin var
