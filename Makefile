# fleet-controller Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= fleet-controller:dev
CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT ?= $(CURDIR)/.cache/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

# Packages under test; envtest/Gitea suites find their binaries through the env below.
# The default, every package, runs through hack/test.sh (the tests in two lanes, with the
# SPIN models and make lint beside them; GINKGO_PROCS, GO_TEST_P and MODEL_JOBS set their
# parallelism); any other list runs through go test, after make lint and the models.
TEST_PKGS ?= ./...
TEST_FLAGS ?= -race -count=1 -timeout=40m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the API types and kubebuilder markers (descriptions reflowed into paragraphs).
	$(CONTROLLER_GEN) rbac:roleName=fleet-controller crd paths="./api/...;./controllers/...;./internal/...;./cmd/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./hack/crd-paragraphs config/crd/bases/*.yaml

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -s -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet $(GOLANGCI_LINT) ## Check formatting, vet, and run golangci-lint (.golangci.yml; depguard keeps the decision packages pure).
	@out=$$(gofmt -s -l $$(find . -name '*.go' -not -path './.cache/*')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT): ## Build the pinned golangci-lint through the Go module proxy (once, then cached).
	GOBIN=$(dir $(GOLANGCI_LINT)) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: verify
verify: ## Regenerate code and manifests and fail if that changed anything (stale generated files).
	@before=$$(hack/tree-digest.sh api config dist); \
	$(MAKE) --no-print-directory generate manifests build-installer >/dev/null; \
	after=$$(hack/tree-digest.sh api config dist); \
	if [ "$$before" != "$$after" ]; then git --no-pager diff --stat -- api config dist; \
	  echo "generated files were stale: run 'make generate manifests build-installer' and commit the result" >&2; exit 1; fi; \
	echo "verify: generated code and manifests are up to date"

.PHONY: envtest
envtest: ## Provide kube-apiserver and etcd for envtest (downloads or builds them once, then cached).
	@hack/envtest.sh >/dev/null

.PHONY: gitea
gitea: ## Build the Gitea test server (once, then cached).
	hack/gitea.sh build

.PHONY: model
model: ## Model-check the claim and apply protocols with SPIN, mutants included (installs SPIN when missing); always searches.
	hack/model/run.sh

.PHONY: test
test: verify ## Run the whole test suite (unit, envtest, real Gitea) under the race detector, beside make lint and the SPIN models (unless these exact models passed before).
	@if [ "$(TEST_PKGS)" = "./..." ]; then exec hack/test.sh; fi; \
	$(MAKE) --no-print-directory lint && MODEL_CACHE=use hack/model/run.sh; \
	assets=$$(hack/envtest.sh | tail -n1); \
	hack/gitea.sh build >&2; \
	echo "KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS=$$assets FLEET_GITEA_SCRIPT=$(CURDIR)/hack/gitea.sh go test $(TEST_FLAGS) $(TEST_PKGS)

.PHONY: test-e2e
test-e2e: ## Run test/e2e: the shipped manifests and images on a real two-node cluster (hack/e2e.sh builds and starts everything; run as root).
	hack/e2e.sh

.PHONY: bench
bench: ## Run the benchmarks (figures are ratios against same-run baselines).
	@assets=$$(hack/envtest.sh | tail -n1); \
	KUBEBUILDER_ASSETS=$$assets FLEET_GITEA_SCRIPT=$(CURDIR)/hack/gitea.sh go test -run '^$$' -bench . -benchmem -timeout 90m ./...

.PHONY: stress
stress: ## The long runs: the TaskClaim contention spec with STRESS_WAVES waves (default 25: 150 rounds of two, 75 of four), and the live-fleet approval landing STRESS_APPROVAL_DELAY (default 5m) after its plan.
	@assets=$$(hack/envtest.sh | tail -n1); \
	hack/gitea.sh build >&2; \
	KUBEBUILDER_ASSETS=$$assets FLEET_GITEA_SCRIPT=$(CURDIR)/hack/gitea.sh FLEET_CONTENTION_WAVES=$${STRESS_WAVES:-25} \
	  go test -race -count=1 -timeout=60m ./controllers/taskclaim/ -ginkgo.focus=Contention -ginkgo.v && \
	KUBEBUILDER_ASSETS=$$assets FLEET_LIVE_APPROVAL_DELAY=$${STRESS_APPROVAL_DELAY:-5m} \
	  go test -race -count=1 -timeout=60m ./controllers/retirementplan/ -ginkgo.focus='live fleet' -ginkgo.v

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 20s).
	hack/fuzz.sh $(or $(FUZZTIME),20s)

##@ Build

.PHONY: build
build: ## Build the manager and the kubectl-fleet plugin, with kubectl_complete-fleet beside it (kubectl's completion of `kubectl fleet`).
	go build -o bin/manager ./cmd
	go build -o bin/kubectl-fleet ./cmd/kubectl-fleet
	install -m 0755 cmd/kubectl-fleet/kubectl_complete-fleet bin/kubectl_complete-fleet

# run starts the built manager, not `go run`: go run exits 1 whenever it sees the
# terminal's Ctrl-C, even after the manager shut down cleanly, so the recipe would fail.
# The manager's own status passes through: 0 after a clean shutdown on SIGINT or SIGTERM,
# 1 on a failure. (GNU make itself still ends by the SIGINT it received, silently.)
.PHONY: run
run: ## Run the manager: against $$KUBECONFIG/in-cluster, or an embedded local control plane when none is configured; without --gitea-url in ARGS, with a local demo Gitea (hack/demo.sh).
	@if [ -z "$${KUBECONFIG:-}" ] && [ ! -f "$$HOME/.kube/config" ] && [ -z "$${KUBERNETES_SERVICE_HOST:-}" ]; then \
	  export KUBEBUILDER_ASSETS=$$(hack/envtest.sh | tail -n1); fi; \
	args="$(ARGS)"; \
	case " $$args " in \
	*" --gitea-url"*) ;; \
	*) demoenv=$$(hack/demo.sh up); trap 'hack/demo.sh down' EXIT; source "$$demoenv"; \
	   args="--gitea-url=$$GITEA_URL --gitea-token-file=$$FLEET_GITEA_TOKEN_FILE --repository=$$FLEET_REPOSITORY --install-manifests=$$FLEET_DEMO_MANIFESTS --install-manifests=$$FLEET_DEMO_OBJECTS --banner-env-file=$$demoenv $$args" ;; \
	esac; \
	go build -o bin/manager ./cmd && bin/manager $$args

.PHONY: images
images: ## Build the manager and worker images as OCI archives into bin/images, without Docker (hack/images.sh).
	hack/images.sh

.PHONY: docker-build
docker-build: ## Build the container image with a Docker engine (the same image as `make images`' manager.tar).
	docker build -t $(IMG) .

.PHONY: cluster-up
cluster-up: images ## Start a real two-node Kubernetes on this machine with the images loaded (hack/cluster.sh; run as root).
	CLUSTER_IMAGES="bin/images/manager.tar bin/images/worker.tar" hack/cluster.sh up 2

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and give the host back as it was.
	hack/cluster.sh down

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster in ~/.kube/config.
	kubectl apply -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the controller into the cluster of $$KUBECONFIG (create the Secret fleet-controller-gitea in fleet-system first).
	kubectl apply --server-side -k config/default

.PHONY: build-installer
build-installer: manifests ## Write dist/install.yaml: everything `make deploy` applies, in one file.
	@mkdir -p dist
	kubectl kustomize config/default > dist/install.yaml
