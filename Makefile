# tabby — see README.md. Every target installs what it needs; tools and the control plane are
# cached under $(TABBY_CACHE) (outside the tree), so a second run costs nothing.
SHELL := /usr/bin/env bash
TABBY_CACHE ?= $(HOME)/.cache/tabby
export TABBY_CACHE
CACHE_BIN := $(TABBY_CACHE)/bin
CONTROLLER_GEN := $(CACHE_BIN)/controller-gen
HELM := $(CACHE_BIN)/helm
# The stock GoBGP CLI of the embedded GoBGP's major version (README: Dependencies).
GOBGP_VERSION := v4.8.0
GOBGP_CLI := $(CACHE_BIN)/gobgp-$(GOBGP_VERSION)
STATICCHECK_VERSION := v0.8.2
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/tabbynet/tabby/internal/version.Version=$(VERSION)
BINARIES := tabby tabby-ipam tabby-node tabby-typha tabbyctl
# The lab, its e2e tests, the benchmarks and the real cluster are their own Go module in hack/
# (it runs this checkout's product through a replace): `./...` at the root leaves them out, so
# every Go command for them runs there (go <command> -C hack).

.PHONY: all build ui generate anp-crds test fuzz unit demo-clean soak integration lint e2e dashboards netpol bench bench-scale demo chart controlplane tools deps clean

all: build

build:
	@echo "building $(BINARIES) into bin/ (about a minute on a cold Go build cache)"
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(BINARIES))

# The web view's page (ui/web: Vite + TypeScript, package-lock.json pinned) built into
# ui/web/dist, which is committed and embedded in the binaries: `go build` needs no npm. The build
# is reproducible, byte for byte: hack/check-generated.sh rebuilds it and compares.
ui:
	cd ui/web && npm ci --no-audit --no-fund && npm run build

$(CONTROLLER_GEN):
	@echo "building controller-gen v0.23.0 (about a minute, once)"
	GOBIN=$(CACHE_BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0

$(HELM):
	@echo "building helm v3.22.0 (about 2 minutes, once)"
	GOBIN=$(CACHE_BIN) $(GO) install helm.sh/helm/v3/cmd/helm@v3.22.0

$(GOBGP_CLI):
	@echo "building the gobgp CLI $(GOBGP_VERSION) (about a minute, once)"
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install github.com/osrg/gobgp/v4/cmd/gobgp@$(GOBGP_VERSION) && mv $$tmp/gobgp $@ && rm -rf $$tmp

tools: $(CONTROLLER_GEN) $(HELM) $(GOBGP_CLI)

# Deepcopy and CRD manifests from apis/v1; the chart's crds/ is the same output.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/v1/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./apis/v1/... output:crd:artifacts:config=apis/crds
	@$(MAKE) -s anp-crds
	@mkdir -p charts/tabby/crds && rm -f charts/tabby/crds/*.yaml && cp apis/crds/*.yaml charts/tabby/crds/

# The AdminNetworkPolicy and BaselineAdminNetworkPolicy CRDs (policy.networking.k8s.io/v1alpha1,
# experimental channel: nodes peers) from the network-policy-api release that last shipped them;
# v0.3.0, whose Go types tabby reads, ships only ClusterNetworkPolicy CRDs. Its v1alpha1 types
# are v0.1.7's.
ANP_CRD_VERSION := v0.1.7
# ClusterNetworkPolicy (v1beta1, served with v1alpha2), what v0.3.0's conformance suite tests.
CNP_CRD_VERSION := v0.3.0
anp-crds:
	@dir=$$($(GO) mod download -json sigs.k8s.io/network-policy-api@$(ANP_CRD_VERSION) | sed -n 's/.*"Dir": "\(.*\)",/\1/p') && \
	for f in adminnetworkpolicies baselineadminnetworkpolicies; do \
		install -m 0644 $$dir/config/crd/experimental/policy.networking.k8s.io_$$f.yaml apis/crds/; \
	done
	@dir=$$($(GO) mod download -json sigs.k8s.io/network-policy-api@$(CNP_CRD_VERSION) | sed -n 's/.*"Dir": "\(.*\)",/\1/p') && \
		install -m 0644 $$dir/config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml apis/crds/
	@mkdir -p charts/tabby/crds && cp apis/crds/policy.networking.k8s.io_*.yaml charts/tabby/crds/

# System packages the tests use (iptables, ipset, bird2, frr, qemu...). Idempotent.
deps:
	@bash hack/install-deps.sh

# kube-apiserver and etcd, built from the Go module proxy once and cached.
controlplane:
	@bash hack/controlplane/build.sh >/dev/null

# What a real cluster's nodes run, and upstream's e2e suite: kubelet, kube-proxy, kube-scheduler,
# kube-controller-manager, containerd (runc comes from deps), e2e.test and agnhost. Built once and
# cached like the control plane.
# A real cluster (hack/cluster): kubelet, kube-proxy, scheduler, controller-manager, agnhost and
# containerd 2.x, built from the Go module proxy once and cached like the control plane; e2e.test
# for the upstream conformance subset.
.PHONY: cluster-deps conformance-deps cluster cluster-clean conformance conformance-anp cluster-lb
cluster-deps: deps
	@bash hack/controlplane/build.sh node containerd dns >/dev/null

conformance-deps: cluster-deps
	@bash hack/controlplane/build.sh e2e >/dev/null

# A program stopped as asked (Ctrl-C, SIGTERM, a closed terminal) ends the target without an
# error: exit 0, or the status of a death by SIGINT, SIGTERM or SIGHUP. Appended to its command.
STOPPED_IS_OK = rc=$$?; if [ $$rc -eq 130 ] || [ $$rc -eq 143 ] || [ $$rc -eq 129 ]; then exit 0; fi; exit $$rc

# A 2-node cluster with tabby installed by helm from charts/tabby; stops on Ctrl-C. Like the lab,
# it runs as its own binary, not under `go run`.
cluster: cluster-deps controlplane tools build
	@$(GO) build -C hack -o $(CURDIR)/bin/cluster ./cluster/cmd/cluster
	@TABBY_BIN=$(CURDIR)/bin bin/cluster up -encap "$(ENCAP)"; $(STOPPED_IS_OK)

# Removes what a killed `make cluster` (or lab) left behind.
cluster-clean:
	$(GO) run -C hack ./cluster/cmd/cluster clean

# The upstream sig-network e2e subset against that cluster; ends with `conformance: N passed, …`.
conformance: conformance-deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin $(GO) run -C hack ./cluster/cmd/cluster conformance -encap "$(ENCAP)"

# network-policy-api v0.3.0's own conformance suite (hack/anpconformance, from the Go module proxy)
# against that cluster: the ClusterNetworkPolicy profile with named ports and nodes peers, SCTP
# skipped. Ends with `anp-conformance: N passed, …`; the report YAML is in $(ARTIFACTS).
ARTIFACTS ?= $(CURDIR)/_artifacts
conformance-anp: cluster-deps controlplane tools build
	$(GO) -C hack/anpconformance test -c -o $(CURDIR)/.cache/anp-conformance.test .
	TABBY_BIN=$(CURDIR)/bin $(GO) run -C hack ./cluster/cmd/cluster anp-conformance -encap "$(ENCAP)" \
		-bin $(CURDIR)/.cache/anp-conformance.test -artifacts $(ARTIFACTS) -version $(VERSION)

# Services of type LoadBalancer on that cluster (hack/cluster TestLoadBalancerOverBGP): an FRR ToR,
# a LoadBalancer IPPool, ECMP under externalTrafficPolicy Cluster, the ToR following the pods under
# Local, with the convergence figures in the log. Minutes, so not in `make test`; LB_ROUNDS=20
# for more samples.
LB_ROUNDS ?= 8
cluster-lb: cluster-deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin TABBY_CLUSTER_LB=1 $(GO) test -C hack -count=1 -timeout 30m -v -run '^TestLoadBalancerOverBGP$$' ./cluster/ -args -lb-rounds=$(LB_ROUNDS)

# helm upgrade under traffic on that cluster (hack/cluster TestUpgrade): OLD installed, upgraded to
# NEW (empty: the working tree) and rolled back, counting resets, lost probes and connects to an
# isolated pod. OLD and NEW are release tags or commits, checked out with git worktree;
# UPGRADE_NODES the cluster's size.
OLD ?= v0.1.0
NEW ?=
UPGRADE_NODES ?= 2
.PHONY: upgrade
upgrade: cluster-deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin TABBY_CLUSTER_UPGRADE=1 $(GO) test -C hack -count=1 -timeout 45m -v -run '^TestUpgrade$$' ./cluster/ -args -upgrade-old=$(OLD) -upgrade-new=$(NEW) -upgrade-nodes=$(UPGRADE_NODES)

# Unit + integration tests: the real API server, real netns, real iptables (root); the product's
# module, then the lab's (hack/), then the oracle's.
test: deps controlplane tools build cluster-deps
	bash hack/check-generated.sh
	$(GO) vet ./...
	$(GO) vet -C hack ./...
	TABBY_BIN=$(CURDIR)/bin $(GO) test -count=1 -p 2 -timeout 25m ./...
	TABBY_BIN=$(CURDIR)/bin $(GO) test -C hack -count=1 -p 2 -timeout 25m ./...
	cd third_party/gobgp && $(GO) test -count=1 ./... # tabby's changes to GoBGP (third_party/gobgp/TABBY.md)
	$(GOBGPFORK) check -root $(CURDIR)
	$(GOBGPFORK) upstream-tests -root $(CURDIR)
	$(NETPOL_ORACLE_TEST)
	@$(MAKE) --no-print-directory fuzz

# tabby's GoBGP fork (third_party/gobgp/TABBY.md): upstream GoBGP, trimmed to the packages
# tabby links, plus the series of patches in third_party/gobgp/patches.
GOBGPFORK = $(GO) run -C hack ./gobgpfork/cmd/gobgpfork
.PHONY: gobgp-apply gobgp-refresh gobgp-series-test gobgp-check gobgp-new-patch test-gobgp-upstream gobgp-upstream-test-patch gobgp-upstream-patches

# The fork built from an upstream version and how each patch applies: TAG=v4.9.0 (Go module
# proxy; default the base version in go.mod) or GIT=<upstream checkout> [REV=<commit>]; OUT=<dir>
# (default a temporary directory) or INTO=1 (into third_party/gobgp); UPTO=N for the first N.
gobgp-apply:
	$(GOBGPFORK) apply -root $(CURDIR) $(if $(TAG),-tag $(TAG)) $(if $(GIT),-git $(GIT)) $(if $(REV),-rev $(REV)) $(if $(OUT),-out $(OUT)) $(if $(INTO),-into) $(if $(UPTO),-upto $(UPTO))

# The base version plus the series is third_party/gobgp, byte for byte (make test runs it).
gobgp-check:
	$(GOBGPFORK) check -root $(CURDIR)

# The series rewritten for a new upstream version (TAG or GIT/REV as above), stopping at a
# conflict for it to be resolved in OUT, then RESUME=N (TABBY.md: Updating GoBGP).
gobgp-refresh:
	@test -n "$(OUT)" || { echo "usage: make gobgp-refresh TAG=v4.9.0 OUT=dir [RESUME=N]" >&2; exit 2; }
	$(GOBGPFORK) refresh -root $(CURDIR) $(if $(TAG),-tag $(TAG)) $(if $(GIT),-git $(GIT)) $(if $(REV),-rev $(REV)) -out $(OUT) $(if $(RESUME),-resume $(RESUME))

# Every prefix of the series builds and passes the tests its last patch adds (minutes: not in make test).
gobgp-series-test:
	$(GOBGPFORK) series-test -root $(CURDIR)

# A change committed to third_party/gobgp becomes the series' next patch (TABBY.md: Adding a change).
gobgp-new-patch:
	@test -n "$(NAME)" || { echo "usage: make gobgp-new-patch NAME=short-name [SUBJECT='First line'] [FROM=<merge commit>]" >&2; exit 2; }
	$(GOBGPFORK) new-patch -root $(CURDIR) -name '$(NAME)' $(if $(SUBJECT),-subject '$(SUBJECT)') $(if $(FROM),-from '$(FROM)')

# Upstream's tests of every package the fork keeps, against the fork, the slow ones too
# (make test leaves those out).
# WORK=<dir> keeps the tree the tests ran in, to adapt an upstream test to a fork change; then
# make gobgp-upstream-test-patch NAME=<the fork patch's NNNN-name> WORK=<dir> (TABBY.md).
test-gobgp-upstream:
	$(GOBGPFORK) upstream-tests -root $(CURDIR) -all $(if $(WORK),-work $(WORK))

gobgp-upstream-test-patch:
	@test -n "$(NAME)" -a -n "$(WORK)" || { echo "usage: make gobgp-upstream-test-patch NAME=NNNN-name WORK=dir" >&2; exit 2; }
	$(GOBGPFORK) upstream-test-patch -root $(CURDIR) -name '$(NAME)' -work '$(WORK)'

# The fixes of upstream bugs written for upstream (third_party/gobgp/upstream/README.md): each
# applied alone to upstream's full tree, its tests failing without the fix and passing with it.
gobgp-upstream-patches:
	$(GOBGPFORK) upstream-patches -root $(CURDIR)

# Bounded fuzzing (CI runs it in `test`): what tabby does with what the BGP speaker delivers, and
# with what users and the API server hand it: CNI configuration and CNI_ARGS, selectors, IPPools
# and BGPPeers (apis/validation against the CRDs' schema and CEL rules; in the lab's module),
# policy rendering against Verdict, IPAM blocks. Each target runs a count of inputs, not a duration, which ends by itself
# without a deadline to miss on a loaded machine. FUZZTIME=10m (or 1000000x) runs every target
# that long instead; new inputs are minimized only with FUZZMINIMIZETIME (e.g. 30s). A crasher is
# written to the package's testdata/fuzz: commit it with the fix, as a regression.
FUZZ_TARGETS := \
	bird/speaker:FuzzBestEvent:50000x \
	bird:FuzzBestPaths:50000x \
	apis/selector:FuzzParse:100000x \
	cni-plugin/config:FuzzParse:100000x \
	cni-plugin/config:FuzzParseArgs:100000x \
	hack/crdschema:FuzzIPPool:2000x \
	hack/crdschema:FuzzBGPPeer:1000x \
	ipam:FuzzDecodeBlock:10000x \
	ipam:FuzzBlockRoundTrip:10000x \
	felix/policy:FuzzRenderedAgreesWithVerdict:100x
FUZZTIME ?=
FUZZMINIMIZETIME ?= 0x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$(if $(FUZZTIME),$(FUZZTIME),$${rest#*:}); \
		mod=.; case $$pkg in hack/*) mod=hack; pkg=$${pkg#hack/};; esac; \
		echo "fuzz: $$name ($$mod: ./$$pkg) $$n"; \
		$(GO) test -C $$mod -run '^$$' -fuzz "^$$name\$$" -fuzztime "$$n" -fuzzminimizetime $(FUZZMINIMIZETIME) ./$$pkg; \
	done

unit:
	$(GO) test -count=1 -short ./...
	$(GO) test -C hack -count=1 -short ./...

lint: 
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -C hack ./...
	@GOBIN=$(CACHE_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || { echo "lint: staticcheck $(STATICCHECK_VERSION) did not install" >&2; exit 1; }
	$(CACHE_BIN)/staticcheck ./...
	cd hack && $(CACHE_BIN)/staticcheck ./...
	@echo "lint: gofmt, go vet and staticcheck $(STATICCHECK_VERSION): ok"

e2e: deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin $(GO) test -C hack -count=1 -timeout 30m -v ./e2e/...

# The chart's Grafana dashboard and alert rules (charts/tabby/files) against a real Prometheus
# scraping a 3-node lab: promtool accepts the rules, every panel's and alert's expression returns
# data, the BGP session alert goes off with a node killed. Half a minute; `make test` runs it too.
dashboards: deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin $(GO) test -C hack -count=1 -timeout 10m -v -run '^TestDashboards$$' ./e2e/

# The fault campaign (hack/chaos, docs/reliability.md): steady traffic on a dual-stack lab, pod to
# pod and through a Service (kube-proxy, from cluster-deps), while agents, the API server, etcd,
# typha replicas, reflectors, the ToR and an uplink fail and a node is power-cycled, one at a time;
# prints the measured table (markdown) and fails if a fault breaks its written expectation. About
# 12 minutes; CHAOS_ARGS e.g. "-outage 30s -rounds 1 -faults typha,uplink". `make test` runs a subset.
.PHONY: chaos
chaos: deps controlplane tools build cluster-deps
	TABBY_BIN=$(CURDIR)/bin $(GO) run -C hack ./chaos/cmd/chaos $(CHAOS_ARGS)

# The NetworkPolicy oracle is its own Go module (hack/netpol/README.md): neither `./...` above reaches it.
NETPOL_ORACLE_TEST = cd hack/netpol/oracle && GOWORK=off GOFLAGS=-mod=mod $(GO) test -count=1 ./...

# NetworkPolicy enforcement judged against the oracle: its own tests, the case tables against
# upstream's, then the lab tests (truth table, pod-start race, restarts under policy, harness).
netpol: deps controlplane tools build
	$(NETPOL_ORACLE_TEST)
	$(GO) test -C hack -count=1 ./netpol/
	TABBY_BIN=$(CURDIR)/bin $(GO) test -C hack -count=1 -timeout 30m -v -run 'TestNetworkPolicy|TestPolicy' ./e2e/

bench: deps controlplane tools build
	TABBY_BIN=$(CURDIR)/bin SKIP_BENCHES="$(SCALE_BENCHES)" bash hack/bench.sh

# Cluster-scale benchmarks: minutes each and the whole machine, so not part of `make bench`.
# hack/bench/scale: a 1,000-node datastore with real tabby-nodes in it (SCALE_ARGS, e.g.
# "-nodes=100 -rates=10" for a quick run); hack/bench/rrscale: two route reflectors with 1,000
# BGP clients (RRSCALE_ARGS, e.g. -clients=50).
SCALE_BENCHES := scale rrscale
bench-scale: deps controlplane tools build
	@status=0; \
	echo "=== bench-scale: scale ==="; \
	TABBY_BIN=$(CURDIR)/bin $(GO) run -C hack ./bench/scale $(SCALE_ARGS) || { echo "bench scale FAILED" >&2; status=1; }; \
	echo "=== bench-scale: rrscale ==="; \
	TABBY_BIN=$(CURDIR)/bin $(GO) run -C hack ./bench/rrscale $(RRSCALE_ARGS) || { echo "bench rrscale FAILED" >&2; status=1; }; \
	exit $$status

# The lab runs as its own binary, not under `go run` (which exits 1 when Ctrl-C reaches it, so a
# clean stop looked like a failure); a stop by Ctrl-C, SIGTERM or a closed terminal exits 0
# once everything is removed.
# FAMILIES=dual gives every pod an IPv4 and an IPv6 address; FAMILIES=ipv6 IPv6 only.
FAMILIES ?= ipv4
# tabby-typha replicas the demo's nodes watch through (make demo TYPHA=2).
TYPHA ?= 0
# ENCAP=vxlan: the pools' vxlanMode Always and no BGP on any node (tabby-node --bgp=none).
ENCAP ?= none
demo: deps controlplane tools build
	@echo "demo: building the lab (seconds once the Go build cache is warm)"
	@$(GO) build -C hack -o $(CURDIR)/bin/lab ./lab/cmd/lab
	@TABBY_BIN=$(CURDIR)/bin bin/lab --families $(FAMILIES) --typha $(TYPHA) --encap $(ENCAP) demo; $(STOPPED_IS_OK)

# A bounded soak on the lab: pod and policy churn, tabby-node restarts (BGP flaps) and
# kube-apiserver restarts in rounds of SOAK_INTERVAL, a sample of every agent at each quiet
# point; fails on growth that does not level off or a count that drifts from the datastore.
# Artifacts (samples.csv, soak.png, summary.txt) in _artifacts/soak. Not part of `make test`.
DURATION ?= 1h
SOAK_INTERVAL ?= 1m
SOAK_ARGS ?=
soak: deps controlplane tools build
	@$(GO) build -C hack -o $(CURDIR)/bin/soak ./soak/cmd/soak
	TABBY_BIN=$(CURDIR)/bin bin/soak -duration $(DURATION) -interval $(SOAK_INTERVAL) -out $(CURDIR)/_artifacts/soak $(SOAK_ARGS)

# Removes what a lab killed hard (SIGKILL, a crash) left behind: namespaces, links, processes.
demo-clean:
	$(GO) run -C hack ./lab/cmd/lab cleanup

chart: $(HELM)
	$(HELM) lint charts/tabby
	$(HELM) package charts/tabby -d bin/

clean:
	rm -rf bin/
