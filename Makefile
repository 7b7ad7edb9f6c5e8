# flock: build, install, demo and the test tiers. Every target that needs
# packages installs what is missing from Debian's archive first.

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
# Debian packages (test/harness/needs.go lists what each tier needs of
# them). DEMO_DEBS are what make demo uses: ca-certificates for the Go
# module proxy, nspawn for the booted systemd machine, nft for the
# firewall, busybox-static for the machine's test root file system.
DEMO_DEBS := ca-certificates systemd systemd-container nftables iproute2 util-linux procps passwd dbus busybox-static
# The test tiers add git (the fresh-machine check copies what git tracks);
# for the VM tier qemu, debootstrap and mkfs.ext4 (the image) and ssh (into
# it); ansible-core, ansible-lint and vagrant for ansible/ and the
# Vagrantfile, and vagrant-libvirt so that its block of the Vagrantfile is
# validated too;
# podman and crun for levels podman and gvisor; python3, a JDK and curl for
# the agents people bring (Node and npm below); gh and python3-requests,
# the clients whose secrets flock-proxy swaps (git and curl too); prometheus for the real
# scrape of /metrics and promtool, which lints the exposition and checks
# and tests monitoring/'s rules; openssl to check the cluster test's
# certificates; lintian, Debian's checker, for the package make deb builds. The cluster test's machines run
# the host's sshd: openssh-server comes from deps-sshd, which keeps this
# host from ever running it.
DEBS      := $(DEMO_DEBS) git qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client \
	ansible-core ansible-lint vagrant vagrant-libvirt podman crun python3 python3-requests gh openjdk-17-jdk-headless curl prometheus openssl lintian

# The nats CLI: the system tests prove that a client an agent brings
# connects with NATS_URL and its credential alone. Built through the Go
# module proxy (Debian has no package of it); ~40 s once.
NATSCLI := github.com/nats-io/natscli/nats@v0.5.1
# gVisor's runsc for level gvisor: Debian has no package, so it is built
# from the Go module proxy at a pinned pseudo-version (about 1.5 min once;
# cached by version). Static (CGO_ENABLED=0): runsc re-executes itself
# inside an empty chroot, where a dynamic binary finds no loader.
RUNSC_VERSION := v0.0.0-20260905035102-160fafc42237
RUNSC_CACHE   := /var/cache/flock-runsc/$(RUNSC_VERSION)
export PATH := $(dir $(GO)):$(PATH)

# What flockctl version prints and the package's version: packaging/version.sh
# says how it is made (a Debian version; BASE_VERSION is the release to come
# until a tag vX.Y.Z exists). Override with make VERSION=... .
BASE_VERSION := 0.1.0
BUILD_INFO   := $(shell sh packaging/version.sh $(BASE_VERSION) 2>/dev/null)
VERSION      ?= $(word 1,$(BUILD_INFO))
COMMIT       ?= $(word 2,$(BUILD_INFO))
SOURCE_DATE_EPOCH ?= $(word 3,$(BUILD_INFO))
BUILD_DATE   ?= $(word 4,$(BUILD_INFO))
VERSION_PKG  := github.com/flockrun/flock/internal/version
# -s -w: no symbol table or DWARF (a third of the size; a panic still
# names every frame). -trimpath, and the commit's time as the build date
# (not the clock's): the same commit builds the same bytes, so building
# again and redeploying restarts nothing. -buildvcs=false: the commit is
# stamped above; what Go would record of the checkout besides depends on
# the builder's GOFLAGS and on .git being there, and so would the bytes.
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false \
	-ldflags '-s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(BUILD_DATE)'

# make deb: nfpm (Debian has no package of it) run through the Go module
# proxy at a pinned version; Go caches the built tool, so no install step.
NFPM   := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
DEBDIR ?= bin
# The architecture make deb builds for: Go's name for it, which is also
# Debian's for amd64 and arm64 (nfpm.yaml's arch).
DEB_ARCH ?= amd64
DEB    := $(DEBDIR)/flock_$(VERSION)_$(DEB_ARCH).deb
# The files make stage gathers for DEB_ARCH's package and tarball.
STAGE  := $(DEBDIR)/stage-$(DEB_ARCH)
# The man pages and completions are written by the programs themselves,
# so by a build that runs here: the target's own when it is this machine's
# platform, else one for this machine, in STAGE/host.
HOST_PLATFORM = $(shell $(GO) env GOHOSTOS)/$(shell $(GO) env GOHOSTARCH)
GEN = $(if $(filter linux/$(DEB_ARCH),$(HOST_PLATFORM)),$(STAGE),$(STAGE)/host)

# make release: what a tag publishes, for each of RELEASE_ARCHES, in
# RELEASE_DIR (docs/install.md says what each file is).
RELEASE_DIR    ?= bin/release
RELEASE_ARCHES ?= amd64 arm64
TARNAME = flock_$(VERSION)_linux_$(DEB_ARCH)

# The licenses of every Go package compiled into the two programs, read
# by go-licenses (Debian has no package of it), pinned with its go.sum in
# packaging/tools/go.mod and built through the Go module proxy once (Go
# caches it). LICENSES_DIR and LICENSED say which module and packages:
# the test of the check itself points them at a fixture.
GO_LICENSES  := $(GO) -C $(CURDIR)/packaging/tools tool -n go-licenses
LICENSES_DIR ?= .
LICENSED     ?= ./cmd/flockctl ./cmd/flock-agent
# A package whose license is restricted (the GPL, the LGPL: their terms
# would bind flock's own), forbidden (in go-licenses' classification, e.g.
# the AGPL or WTFPL) or not recognized fails the build until a person has
# looked at it.
LICENSES_DENY := forbidden,restricted,unknown

.PHONY: all build deb stage release release-arch install deps deps-demo deps-sshd runsc demo docs test test-unit test-fuzz preflight test-fresh test-system test-vm bench fmt vet clean licenses-check

all: build

# Static: flock-agent also runs inside podman and gVisor containers, on
# whatever root file system the agent brings.
build:
	$(GOBUILD) -o bin/flockctl ./cmd/flockctl
	$(GOBUILD) -o bin/flock-agent ./cmd/flock-agent

# The Debian package (packaging/nfpm.yaml): the two programs for
# linux/DEB_ARCH in /usr/bin, bash and zsh completions and man pages that
# the programs themselves generate, the README and docs/, the example spec, the
# copyright file, a changelog entry for this version, and the licenses of
# every Go package compiled in (checked first: make licenses-check).
deb: licenses-check stage
	$(nfpm-deb)
	rm -rf $(STAGE)
	@echo "$(DEB): $$(du -k $(DEB) | cut -f1) KiB"

# What the package and the tarball of DEB_ARCH hold, gathered in STAGE.
stage:
	@test -n "$(VERSION)" || { echo "make $@: no VERSION (packaging/version.sh failed)" >&2; exit 1; }
	rm -rf $(STAGE)
	mkdir -p $(STAGE)/completion
	GOOS=linux GOARCH=$(DEB_ARCH) $(GOBUILD) -o $(STAGE)/ ./cmd/flockctl ./cmd/flock-agent
	$(if $(filter $(STAGE),$(GEN)),,$(GOBUILD) -o $(GEN)/ ./cmd/flockctl ./cmd/flock-agent)
	$(GEN)/flockctl completion bash > $(STAGE)/completion/flockctl
	$(GEN)/flockctl completion zsh > $(STAGE)/completion/_flockctl
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GEN)/flockctl man $(STAGE)/man
	$(GEN)/flock-agent --man > $(STAGE)/man/flock-agent.1
	rm -rf $(STAGE)/host
	gzip -9n $(STAGE)/man/*.1
	sh packaging/changelog.sh $(VERSION) $(COMMIT) $(SOURCE_DATE_EPOCH) | gzip -9n > $(STAGE)/changelog.gz
	gl=$$($(GO_LICENSES)) && GOOS=linux GOARCH=$(DEB_ARCH) $$gl save $(LICENSED) --save_path $(STAGE)/licenses --ignore github.com/flockrun/flock && \
		GOOS=linux GOARCH=$(DEB_ARCH) $$gl report $(LICENSED) > $(STAGE)/licenses/report.csv
	install -D -m 0644 "$$($(GO) env GOROOT)/LICENSE" $(STAGE)/licenses/go/LICENSE
	chmod -R u+w,a+rX $(STAGE)/licenses

# The package of STAGE, by nfpm.
nfpm-deb = VERSION=$(VERSION) DEB_ARCH=$(DEB_ARCH) DEBROOT=$(STAGE) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	$(GO) run $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(DEB)

# make release: for each architecture the Debian package, a tarball of
# the programs with their man pages, completions and licenses (unpacked
# into /usr/local it installs them: docs/install.md), and an SBOM of the
# Go modules compiled in (CycloneDX, packaging/sbom); SHA256SUMS over them
# all. The same commit builds the same bytes (TestReleaseReproducible):
# the commit's time stamps everything, and each architecture's make gets
# this one's version and time, so a dirty tree's clock is read once.
release: licenses-check
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	for a in $(RELEASE_ARCHES); do \
		$(MAKE) --no-print-directory release-arch DEBDIR=$(RELEASE_DIR) DEB_ARCH=$$a VERSION=$(VERSION) COMMIT=$(COMMIT) \
			SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) BUILD_DATE=$(BUILD_DATE) || exit 1; \
	done
	cd $(RELEASE_DIR) && files=$$(LC_ALL=C ls) && sha256sum $$files > SHA256SUMS
	@cd $(RELEASE_DIR) && ls -l

# One architecture of make release (DEB_ARCH, into DEBDIR).
release-arch: stage
	$(nfpm-deb)
	rm -rf $(STAGE)/tar
	install -D -m 0755 -t $(STAGE)/tar/$(TARNAME)/bin $(STAGE)/flockctl $(STAGE)/flock-agent
	install -D -m 0644 -t $(STAGE)/tar/$(TARNAME)/share/man/man1 $(STAGE)/man/*.1.gz
	install -D -m 0644 $(STAGE)/completion/flockctl $(STAGE)/tar/$(TARNAME)/share/bash-completion/completions/flockctl
	install -D -m 0644 $(STAGE)/completion/_flockctl $(STAGE)/tar/$(TARNAME)/share/zsh/site-functions/_flockctl
	install -D -m 0644 -t $(STAGE)/tar/$(TARNAME)/share/doc/flock README.md LICENSE NOTICE
	cp -R $(STAGE)/licenses $(STAGE)/tar/$(TARNAME)/share/doc/flock/licenses
	tar -C $(STAGE)/tar --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
		--mtime=@$(SOURCE_DATE_EPOCH) --mode=u+w,go-w,a+rX -cf - $(TARNAME) | gzip -9n > $(DEBDIR)/$(TARNAME).tar.gz
	CGO_ENABLED=0 $(GO) run ./packaging/sbom/cmd/sbom -version $(VERSION) -epoch $(SOURCE_DATE_EPOCH) \
		-o $(DEBDIR)/$(TARNAME).cdx.json $(STAGE)/flockctl $(STAGE)/flock-agent
	rm -rf $(STAGE)

# Fails when a package compiled into the programs has a license of
# LICENSES_DENY's kinds, naming it and its license (TestLicensesCheck
# shows it does).
licenses-check:
	gl=$$($(GO_LICENSES)) && cd $(LICENSES_DIR) && $$gl check --disallowed_types=$(LICENSES_DENY) $(LICENSED)

install: build
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 bin/flockctl bin/flock-agent $(DESTDIR)$(BINDIR)/

# deps installs only what is missing, so it is quick and offline when
# everything is there; deps-demo only what make demo needs.
define install-debs
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps-demo:
	$(call install-debs,$(DEMO_DEBS))

# Node and npm come from Debian unless a node with npm is there already
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm).
deps:
	$(call install-debs,$(DEBS))
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "installing: nodejs npm"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; }
	@command -v nats >/dev/null || { echo "installing the nats CLI ($(NATSCLI))"; GOBIN=$(BINDIR) $(GO) install $(NATSCLI); }
	@$(MAKE) --no-print-directory runsc deps-sshd

# openssh-server for the cluster test: its machines are overlays of this
# host's /, and each runs sshd for Ansible. This host must never run it:
# policy-rc.d refuses the start its postinst asks for (invoke-rc.d and
# deb-systemd-invoke both ask it; one already there, e.g. a container
# image's, is left as it is), the units it enabled are disabled (offline:
# PID 1 may not be systemd), and /etc/ssh/sshd_not_to_be_run, Debian's own
# switch, keeps ssh.service and the init script from starting it later. A
# host that has openssh-server already (one CI logs into) is not touched.
deps-sshd:
	@if ! dpkg-query -W -f='$${Status}\n' openssh-server 2>/dev/null | grep -q '^install ok installed'; then \
		echo "installing: openssh-server (for the test machines; never started on this host)"; \
		mkdir -p /etc/ssh && touch /etc/ssh/sshd_not_to_be_run; \
		made=; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && made=1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server; rc=$$?; \
		if [ -n "$$made" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
		systemctl --root=/ disable --quiet ssh.service ssh.socket 2>/dev/null; \
		update-rc.d ssh disable >/dev/null 2>&1; \
		exit $$rc; \
	fi

runsc:
	@if [ ! -x $(RUNSC_CACHE)/runsc ]; then \
		echo "building runsc $(RUNSC_VERSION) (static, about 1.5 min once)"; \
		CGO_ENABLED=0 GOBIN=$(RUNSC_CACHE).tmp $(GO) install gvisor.dev/gvisor/runsc@$(RUNSC_VERSION) && \
		rm -rf $(RUNSC_CACHE) && mv $(RUNSC_CACHE).tmp $(RUNSC_CACHE); \
	fi
	@cmp -s $(RUNSC_CACHE)/runsc $(BINDIR)/runsc || install -D -m 0755 $(RUNSC_CACHE)/runsc $(BINDIR)/runsc

# demo provisions examples/flock.yaml: on the host when PID 1 is systemd,
# otherwise in a throw-away systemd machine (systemd-nspawn).
demo: deps-demo build
	@if [ -d /run/systemd/system ]; then $(MAKE) install; fi
	$(GO) run ./test/demo -f examples/flock.yaml

test-unit: licenses-check
	$(GO) test -count=1 $$($(GO) list ./... | grep -vE '/test(/|$$)')

# What every tier needs of the machine (TestPreflight), and the tools
# tier, which boots nothing: the Vagrantfile and the Ansible role.
PREFLIGHT := ^(TestPreflight|TestVagrantfileValidates|TestAnsiblePlaybookSyntax|TestAnsibleSpecTemplate)$$
preflight: deps
	$(GO) test -count=1 -timeout 10m -v -run '$(PREFLIGHT)' ./test/

# .ci/run's set-up and make preflight on a fresh Debian 12 with nothing but
# Go (debootstrap; the tree is cached in /var/cache/flock-fresh): catches
# a test that leans on what this machine happened to have.
test-fresh: deps
	$(GO) test -count=1 -timeout 20m -v -run '^TestFreshMachine$$' ./test/

# The VM tier (tests named TestVM*) runs in test-vm only, and preflight and
# the fresh machine in their own targets, so nothing runs twice.
test-system: deps preflight
	$(GO) test -count=1 -timeout 40m -v -skip '^(TestVM|TestFreshMachine$$)|$(PREFLIGHT)' ./test/...

# A qemu VM per test, under software emulation: the first run builds the
# image (a few minutes; cached in /var/cache/flock-vm by its recipe).
# Each VM test calls t.Parallel and has its own VM, port and directories,
# but VM_PARALLEL is 1: on 2 cores two guests at once each took twice as
# long (measured), so nothing was gained. -p 1: one package at a time.
VM_PARALLEL ?= 1
test-vm: deps
	$(GO) test -count=1 -timeout 60m -v -p 1 -parallel $(VM_PARALLEL) -run '^TestVM' ./test/...

# The spec parser under the fuzzer for a bounded time (longer locally:
# make test-fuzz FUZZTIME=10m). Failures land in spec/testdata/fuzz.
FUZZTIME ?= 60s
test-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./spec

# make test runs the tiers in stages (test/tiers): each stage after the
# last, the tiers joined by + at once. The system tier mostly waits on its
# machines and the VM tier's guests on their emulated CPUs, so the two
# share the cores well. Each tier's output goes to bin/test-logs/ too, and
# the run ends with each tier's time against its budget (docs/testing.md,
# Budgets), the slowest tests, and last why each failed test failed (CI
# keeps only the end of the output). CI has 90 minutes; the budgets hold
# the run to 60.
TIERS := test-unit test-fuzz test-fresh preflight test-system+test-vm
test: deps
	@CGO_ENABLED=0 $(GO) build -o bin/tiers ./test/tiers
	@bin/tiers -make "$(MAKE)" $(TIERS)

# One table of flock's figures against their floors, measured in the same
# run; never a pass/fail on speed. Each benchmark prints its rows
# (test/benchrow) and repeats its own measures (-benchtime 1x); the go test
# output goes to stderr as it comes, the table (aligned, then Markdown) to
# stdout. The packages run one after the other so no two share the cores.
# QUICK=1 is the short form: N ≤ 100, one repetition, a few minutes.
QUICK ?=
bench: deps
	@CGO_ENABLED=0 $(GO) build -o bin/benchtable ./test/benchtable
	@{ for p in ./bus/ ./proxy/ ./gateway/ ./test/; do \
		FLOCK_BENCH_QUICK=$(QUICK) $(GO) test -count=1 -timeout 6h -run '^$$' -bench . -benchtime 1x $$p; \
	done; } 2>&1 | FLOCK_BENCH_QUICK=$(QUICK) bin/benchtable

# The CLI reference, docs/cli: a page per verb from the same text as
# --help (TestCLIReferenceIsGenerated fails when it is stale).
docs:
	$(GO) run ./cmd/flockctl man --markdown docs/cli

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
