# Nereid. `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO            ?= go
OUTPUT_DIR    ?= _output
BIN_DIR       := $(OUTPUT_DIR)/bin
# Integration tests start their own control plane per test binary; set
# NEREID_TEST_KUBECONFIG to reuse a running one instead (e.g. the one of make local-up).
TEST_TIMEOUT  ?= 30m
# test-integration runs two of its packages at once (Go's default -p on 2 cores; at 4,
# the real pods of test/e2e were slow enough for DI-orchestrator's mock to hang, see
# docs/development.md); inside a package, framework.Parallel sets how many of its tests
# run at once.
# make test vets once: make verify runs go vet ./... (every analyzer), so make test's go
# test runs skip go test's own vet (a subset of the same analyzers) with -vet=off;
# make test-unit or test-integration alone keep it.
GO_TEST_VET   ?=
# What the binaries' --version prints and their first log line says (pkg/version):
# git describe --tags --always --dirty of the checkout, else dev. hack/lib/version.sh
# computes it for every build (make build, images, local-up); VERSION=<v> sets another.
VERSION       ?= $(shell bash hack/lib/version.sh)
export NEREID_VERSION := $(VERSION)
# Everything make builds, vets and tests is built static (CGO_ENABLED=0), as the images'
# binaries must be: Go's build cache keys every package on that setting, so with one
# setting the images (make images, the real nodes of make test) reuse what local-up and
# the tests compiled instead of compiling Kubernetes' client libraries again (2.5 min of
# 2 cores with an empty cache). hack/build-tools.sh builds the pinned tools as before.
export CGO_ENABLED ?= 0

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build Nereid's binaries (globalmanager, localcontroller, nereid-preflight, kubectl-nereid) into _output/bin.
	$(GO) build -ldflags "$$(bash hack/lib/version.sh --ldflags)" -o $(BIN_DIR)/ ./cmd/...

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers, apply configurations, CRDs and build/deploy/nereid.yaml.
	bash hack/update-codegen.sh

.PHONY: verify
verify: ## Fail if generated code or manifests are stale, code is not gofmt'ed, go.mod is untidy or go vet complains.
	bash hack/verify-codegen.sh
	@out="$$(gofmt -l cmd internal pkg test hack build 2>/dev/null)"; if [[ -n "$$out" ]]; then echo "not gofmt'ed: $$out" >&2; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...

.PHONY: tools
tools: ## Build (or reuse) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, and the real nodes' kubelet, kube-proxy and coredns.
	bash hack/build-tools.sh

.PHONY: images
images: ## Build the globalmanager and localcontroller images (docker or podman) under the chart's image names (REGISTRY=<registry> for yours, PUSH=1 to push); without an engine, as archives under _output/images for ctr import.
	NEREID_IMAGE_REGISTRY='$(REGISTRY)' NEREID_IMAGE_PUSH='$(PUSH)' bash hack/images.sh

.PHONY: local-up
local-up: ## Bring up the local control plane (builds the tools the first time: minutes).
	bash hack/local-up.sh

.PHONY: local-down
local-down: ## Stop every process of the local control plane (PURGE=1 also deletes its state).
	bash hack/local-down.sh $(if $(PURGE),--purge)

.PHONY: test-unit
test-unit: ## Unit tests (no cluster), the Helm chart's lint and renders, and hack/'s checks (links, function length) included.
	bash hack/build-tools.sh helm
	$(GO) test $(GO_TEST_VET) -count=1 ./cmd/... ./internal/... ./pkg/... ./hack/... ./build/...

.PHONY: test-integration
test-integration: tools ## Integration tests against a real local control plane (as root it installs the Python packages Sedna's worker library needs).
	@bash hack/sedna-python.sh
	@command -v chromium >/dev/null 2>&1 || echo "dashboard browser tests skipped: no chromium on PATH; apt-get install chromium" >&2
	@[[ "$$(id -u)" == 0 ]] || echo "end-to-end tests on real nodes (test/e2e) skipped: they need root" >&2
	$(GO) test $(GO_TEST_VET) -count=1 -timeout $(TEST_TIMEOUT) ./test/...

.PHONY: demo
demo: ## Run the federated learning example on the local run, playing the workers (make local-up first).
	$(GO) run ./hack/demo $(DEMO_ARGS)

.PHONY: demo-incremental
demo-incremental: ## Run the incremental learning example: grow its dataset on edge-0 and play 3 rounds (make local-up first; watch kubectl get il -w).
	$(GO) run ./hack/demo -example incrementallearningjob $(DEMO_ARGS)

.PHONY: demo-lifelong
demo-lifelong: ## Run the lifelong learning example: grow its dataset on edge-0 and play 3 rounds (make local-up first; watch kubectl get ll -w).
	$(GO) run ./hack/demo -example lifelonglearningjob $(DEMO_ARGS)

.PHONY: demo-dijob
demo-dijob: ## Run the DIJob example: show its replicas' pods, DI_RANK/DI_NODES, Service and the replicas API's answer, then play the learner and evaluator to the end (make local-up first; watch kubectl get dijob -w).
	$(GO) run ./hack/demo -example dijob $(DEMO_ARGS)

.PHONY: demo-dijob-v1
demo-dijob-v1: ## Run the v1alpha1 DIJob example and play its coordinator against the v1 replicas server: ask for replicas, list, fail, give back, succeed (make local-up first).
	$(GO) run ./hack/demo -example dijob-v1 $(DEMO_ARGS)

.PHONY: demo-real
demo-real: ## On real nodes (NEREID_REAL_NODES=2 make local-up first): Sedna's federated learning with Sedna's own library, then DI-orchestrator's mock DIJob; prints the rounds and the phases.
	bash hack/demo-real.sh

.PHONY: dashboard
dashboard: ## Build kubectl-nereid and serve its read-only dashboard of the local run's every namespace on 127.0.0.1 (make local-up first; DASHBOARD_ARGS='-n demo --port 8080'); open the URL it prints, Ctrl-C stops it.
	$(GO) build -ldflags "$$(bash hack/lib/version.sh --ldflags)" -o $(BIN_DIR)/ ./cmd/kubectl-nereid
	@kubeconfig="$${NEREID_OUT_DIR:-$(OUTPUT_DIR)/local}/kubeconfig"; \
	if [[ ! -f "$$kubeconfig" ]]; then echo "no local run at $$kubeconfig: make local-up first" >&2; exit 1; fi; \
	echo "$(BIN_DIR)/kubectl-nereid dashboard --kubeconfig $$kubeconfig $(or $(DASHBOARD_ARGS),--all-namespaces)"; \
	exec $(BIN_DIR)/kubectl-nereid dashboard --kubeconfig "$$kubeconfig" $(or $(DASHBOARD_ARGS),--all-namespaces)

.PHONY: bench
bench: tools ## Benchmark the GlobalManager, then the cloud–edge channel, on a fresh local control plane; prints tables, writes _output/bench/*.json (BENCH_ARGS='-only edge').
	$(GO) run ./test/bench $(BENCH_ARGS)

.PHONY: bench-compare
bench-compare: ## Run the bench of BASE=<commit> and of the working tree, section by section, alternating; prints a table per section with a ! where the working tree is >10 % worse, writes _output/bench-compare/<time>/ (SECTIONS=globalmanager,dijob,edge,edge-scale, RUNS=2, BENCH_ARGS for both sides).
	@if [[ -z "$(BASE)" ]]; then echo "make bench-compare: BASE is required: the commit to compare the working tree against (make bench-compare BASE=main)" >&2; exit 2; fi
	$(GO) run ./hack/benchcompare -base '$(BASE)' $(if $(SECTIONS),-sections '$(SECTIONS)') $(if $(RUNS),-runs '$(RUNS)') -- $(BENCH_ARGS)

.PHONY: test
test: GO_TEST_VET := -vet=off
test: verify test-unit test-integration ## Everything CI runs: verify, unit and integration tests.
