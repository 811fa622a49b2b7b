# berth: see README.md and CONTRIBUTING.md. `make test` is what CI runs (.ci/run).
GO        ?= go
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
# grpcnotrace drops golang.org/x/net/trace and with it html/template, whose
# reflection keeps every method of every type alive: -20% binary, -4 MB RSS.
BUILDTAGS := grpcnotrace
PKGS      := ./cmd/... ./bench/... ./internal/... ./packaging/... ./e2e/testbed/... ./e2e/systemdbed/...
# FUZZTIME is per fuzz target; FUZZ_TARGETS lists them as target:package
# (go test -fuzz runs one target of one package at a time). It is a count
# of inputs, not a duration: Go 1.26's fuzzing coordinator can fail a
# target with a bare "context deadline exceeded" when a -fuzztime
# duration ends while a starved worker is mid-call (golang/go#75804, fixed
# in Go 1.27), which a loaded machine hits. 1000 inputs take 1 to 15 s per
# target here; FUZZTIME=10m on one target (make fuzz
# FUZZ_TARGETS=FuzzDecode:./internal/podspec/) digs deeper.
FUZZTIME  ?= 1000x
FUZZ_TARGETS := FuzzDecode:./internal/podspec/ FuzzRedactURL:./internal/podspec/ FuzzDecodeState:./internal/source/laststate/ FuzzCheckPullSecret:./internal/podspec/ FuzzPollHints:./internal/source/httpsource/ \
	FuzzParseAllowedSigners:./internal/source/signature/ FuzzVerifySignature:./internal/source/signature/ FuzzDecodeSerial:./internal/source/signature/ \
	FuzzParseLine:./internal/podlogs/ FuzzEachLineBackward:./internal/podlogs/ FuzzCopy:./internal/podlogs/ \
	FuzzParseLogOptions:./internal/api/ FuzzDecodeRollbackState:./internal/rollback/ FuzzConfigFile:./internal/config/ \
	FuzzParseResolvConf:./internal/poddns/ FuzzUnescapeMountPath:./internal/volumes/ FuzzEnvFileValue:./internal/volumes/ FuzzParseDockerConfig:./internal/pullauth/ FuzzParseProviderResponse:./internal/images/ \
	FuzzOpenSubPath:./internal/volumes/ FuzzParseCNIConfig:./internal/doctor/ FuzzAgentCommand:./internal/doctor/ FuzzRead:./internal/imagearchive/ FuzzListDecode:./internal/criclient/

.PHONY: all build man test lint vet unit e2e e2e-all fuzz testbed testbed-up testbed-down bench soak clean

# CONTAINERD is the test bed's containerd for e2e, bench, soak, demo and
# testbed-up: 1.6 (Debian's package), 1.7, 2.1, 2.3 or 2.4 (built from
# their Go modules, a few minutes each, and cached with the test images),
# or an exact 1.7.x / 2.x.y release; or crio for CRI-O (built the same
# way, with CGO off; not part of `make test`). E2E_CONTAINERDS are the
# versions `make test` runs the end-to-end suite on, side by side: the
# distribution's 1.6 and the 2.3 LTS.
CONTAINERD      ?= $(if $(BERTH_CONTAINERD),$(BERTH_CONTAINERD),1.6)
E2E_CONTAINERDS ?= 1.6 2.3
export BERTH_CONTAINERD := $(CONTAINERD)

all: build

# -buildvcs=auto stamps the commit into the binary wherever git knows it
# (go version -m, berth_build_info, /version), whatever GOFLAGS says.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o bin/berth ./cmd/berth

# man writes bin/man/berth*.1 from the command tree; the generator runs
# with `go run` so cobra/doc and go-md2man stay out of bin/berth.
man:
	rm -rf bin/man
	$(GO) run ./internal/cli/gen -man bin/man -version $(VERSION)

# `make lint` fails on any finding: gofmt, go vet and staticcheck over
# every package (end-to-end tests included), go vet again for 32-bit ARM
# (where statfs fields are int32, so a release's armhf build breaks
# first), and a go.mod that `go mod tidy` would change. staticcheck runs its default checks (its own choice
# of the stylecheck ST checks is left as it ships: package-comment and
# naming style it does not enable by default stay off), pinned by version
# so a new release cannot fail an old commit; `go run pkg@version` builds
# it from the module proxy into the Go build cache without touching
# berth's go.mod.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags e2e ./...
	GOARCH=arm GOARM=7 $(GO) vet ./...
	$(GO) run $(STATICCHECK) -tags e2e ./...
	$(GO) mod tidy -diff

vet: lint

unit:
	$(GO) test -race -count=1 $(PKGS)

# E2E_PKGS run on every containerd version; the systemd test bed runs
# its own containerd inside a booted Debian, so it runs once (E2E_SYSTEMD).
# kubeadm's flows write /etc/kubernetes and take the control plane's fixed
# host ports, so they run once too, on containerd 1.6, under a lock the
# package takes for the machine (E2E_KUBEADM;
# the first run builds Kubernetes from its modules into the test beds'
# cache, hence the longer timeout).
E2E_PKGS   := ./internal/kuberuntime/... ./internal/runtimewatch/... ./internal/gc/... ./internal/criclient/... ./internal/doctor/... ./e2e ./e2e/cli/... ./e2e/testbed/... ./e2e/controlplane/...
E2E_SYSTEMD := ./e2e/systemdbed/...
E2E_KUBEADM := ./e2e/kubeadm/...

e2e: build testbed release
	BERTH_RELEASE_DIR=$(abspath $(RELEASE_DIR)) $(GO) test -race -count=1 -tags e2e -timeout 25m $(E2E_PKGS) $(E2E_SYSTEMD)
	BERTH_CONTAINERD=1.6 $(GO) test -race -count=1 -tags e2e -timeout 60m $(E2E_KUBEADM)

# e2e-all runs the suite on every version at once, each on its own test
# bed, and beside them the kubeadm flows (their own bed; the control
# plane's fixed host ports are none the suites use): most of a suite's
# time is waiting on pods, so running them side by side takes little more
# than the slowest alone. Each run's output is kept in E2E_LOGS and
# printed whole, one after the other, once all have ended; a failing run
# fails the target. The systemd bed runs last, alone.
E2E_LOGS ?= $(CURDIR)/.e2e-logs
e2e-all: build testbed
	@mkdir -p $(E2E_LOGS); rm -f $(E2E_LOGS)/e2e-*; for v in $(E2E_CONTAINERDS); do \
		echo "e2e on containerd $$v: started, output in $(E2E_LOGS)/e2e-$$v.log"; \
		( BERTH_CONTAINERD=$$v $(GO) test -race -count=1 -tags e2e -timeout 25m $(E2E_PKGS) \
			> $(E2E_LOGS)/e2e-$$v.log 2>&1 && echo 0 > $(E2E_LOGS)/e2e-$$v.rc || echo 1 > $(E2E_LOGS)/e2e-$$v.rc ) & \
	done; \
	echo "e2e of the kubeadm flows: started, output in $(E2E_LOGS)/e2e-kubeadm.log"; \
	( BERTH_CONTAINERD=1.6 $(GO) test -race -count=1 -tags e2e -timeout 60m $(E2E_KUBEADM) \
		> $(E2E_LOGS)/e2e-kubeadm.log 2>&1 && echo 0 > $(E2E_LOGS)/e2e-kubeadm.rc || echo 1 > $(E2E_LOGS)/e2e-kubeadm.rc ) & \
	wait; failed=""; for v in $(E2E_CONTAINERDS) kubeadm; do \
		echo "e2e $$v:"; cat $(E2E_LOGS)/e2e-$$v.log; \
		[ "$$(cat $(E2E_LOGS)/e2e-$$v.rc)" = 0 ] || failed="$$failed $$v"; \
	done; if [ -n "$$failed" ]; then echo "e2e failed:$$failed"; exit 1; fi
	BERTH_RELEASE_DIR=$(abspath $(RELEASE_DIR)) $(GO) test -race -count=1 -tags e2e -timeout 25m $(E2E_SYSTEMD)

# A bounded run of every fuzz target over input berth does not control:
# manifests, signatures, state files, CRI log files, log queries, config
# files, resolv.conf, mount paths, credentials and credential provider
# plugins' answers, CNI configurations and other processes' command lines.
fuzz:
	@set -e; for tp in $(FUZZ_TARGETS); do \
		echo "fuzz $${tp%%:*} in $${tp#*:} for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$${tp%%:*}\$$" -fuzztime=$(FUZZTIME) $${tp#*:}; \
	done

# testbed first: some unit tests (test images, packaging) skip without the
# packages it installs, and a fresh CI machine must not skip them silently.
# release-check before e2e-all: the systemd test bed installs the released
# amd64 .deb from $(RELEASE_DIR).
test: testbed lint unit fuzz release-check e2e-all

# The real-containerd test bed (e2e/testbed): `testbed` installs what it
# needs with apt when missing and builds the runtimes of E2E_CONTAINERDS
# and CONTAINERD not yet cached (once per machine, one build at a time
# under the cache's lock, so a first e2e run's timeout is not spent on
# it); `testbed-up` starts a private containerd in
# $(TESTBED_DIR) that stays up (its endpoint is printed and kept in
# $(TESTBED_DIR)/bed.json), `testbed-down` tears it all down.
# TESTBED_FLAGS=-registry adds a local registry serving busybox; the bed
# runs $(CONTAINERD).
TESTBED_DIR   ?= .testbed
TESTBED_FLAGS ?=

testbed:
	@sh e2e/testbed/install.sh
	@sh e2e/systemdbed/install.sh
	@$(MAKE) --no-print-directory release-tools
	@if [ "$(CONTAINERD)" = crio ]; then sh e2e/testbed/install.sh testbed-crio conmon nftables gcc libc6-dev; fi
	@$(GO) run ./e2e/testbed/cmd/testbed build $(sort $(E2E_CONTAINERDS) $(CONTAINERD))

testbed-up: testbed
	@$(GO) run ./e2e/testbed/cmd/testbed up -dir $(TESTBED_DIR) $(TESTBED_FLAGS)

testbed-down:
	@$(GO) run ./e2e/testbed/cmd/testbed down -dir $(TESTBED_DIR)

# `make demo`: berth in the foreground on examples/, against a private
# containerd in $(TESTBED_DIR) with all of berth's directories under it;
# Ctrl-C stops berth and takes the bed down (examples/demo.sh).
demo: build testbed
	@TESTBED_DIR=$(TESTBED_DIR) GO=$(GO) sh examples/demo.sh

# `make release`: static binaries for linux/amd64, arm64 and arm (GOARM=7),
# their .deb and .rpm (nfpm, pinned in packaging/tools), SBOMs and
# SHA256SUMS in $(RELEASE_DIR) (packaging/release.sh says what and how).
# BERTH_RELEASE_KEY names the ed25519 key that signs SHA256SUMS; without
# it the release is unsigned and says so. `make deb` packages the host's
# architecture only. `make release-check` runs lintian, rpmlint, an rpm
# install into a scratch root and the arm builds under qemu-user
# (packaging/check.sh), installing those tools with apt when missing.
RELEASE_DIR ?= dist

release:
	@GO=$(GO) MAKE=$(MAKE) sh packaging/release.sh $(RELEASE_DIR)

deb:
	@GO=$(GO) MAKE=$(MAKE) RELEASE_ARCHES=$$($(GO) env GOARCH) sh packaging/release.sh $(RELEASE_DIR)

release-tools:
	@sh e2e/testbed/install.sh release lintian rpm rpmlint qemu-user-static binfmt-support

release-check: release-tools release
	@GO=$(GO) sh packaging/check.sh $(RELEASE_DIR)

.PHONY: demo deb release release-tools release-check fleet-sim

# The performance figures: builds berth, starts a private test bed,
# prints one table and writes bench/results.json. BENCH_FLAGS passes
# flags through, e.g. BENCH_FLAGS='-quick -only add,remove', or
# -agent '...' to measure another agent (see bin/berthbench -h). A full
# run (no BENCH_FLAGS) then replaces docs/performance.md's table of its
# runtime with its figures (bench/cmd/benchdocs).
BENCH_FLAGS ?=

bench: build testbed
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/berthbench ./bench/cmd/berthbench
	bin/berthbench $(BENCH_FLAGS)
	@if [ -z "$(BENCH_FLAGS)" ]; then $(GO) run ./bench/cmd/benchdocs -results bench/results.json -doc docs/performance.md; fi

# The GC soak: 20 crash-looping and 20 chatty pods on a
# private test bed for 10 minutes; prints disk used under berth's log and
# root directories, its RSS and goroutines at the start and the end.
# SOAK_FLAGS passes flags through, e.g. SOAK_FLAGS='-duration 2m'.
SOAK_FLAGS ?=

soak: build testbed
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/berthsoak ./bench/soak
	bin/berthsoak -berth bin/berth $(SOAK_FLAGS)

# The fleet simulation: N simulated devices running berth's
# real URL source and status reporter against a private nginx on loopback;
# prints the server's idle load and rollout times with and without poll
# jitter. Not part of `make test`. FLEET_FLAGS passes flags through, e.g.
# FLEET_FLAGS='-n 500 -idle 30s -sig'.
FLEET_FLAGS ?=

fleet-sim: testbed
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/fleetsim ./bench/fleetsim
	bin/fleetsim $(FLEET_FLAGS)

clean:
	rm -rf bin $(RELEASE_DIR)
