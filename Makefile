# flock: build, install, demo and the test tiers. Every target that needs
# packages installs what is missing from Debian's archive first.

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
# Debian packages the system tiers use: nspawn for the booted systemd
# machine, nft for the firewall, ip/nsenter/setpriv/ps for the tests; for
# the VM tier qemu, debootstrap and mkfs.ext4 (the image) and ssh (into
# it); ansible-core and vagrant for ansible/ and the Vagrantfile; podman,
# crun and busybox-static for levels podman and gvisor (busybox makes the
# tests' root file system).
DEBS    := systemd systemd-container nftables iproute2 util-linux procps passwd dbus \
	qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client \
	ansible-core vagrant podman crun busybox-static
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

.PHONY: all build install deps runsc demo test test-unit test-fuzz test-system test-vm bench fmt vet clean

all: build

# Static: flock-agent also runs inside podman and gVisor containers, on
# whatever root file system the agent brings.
build:
	CGO_ENABLED=0 $(GO) build -o bin/flockctl ./cmd/flockctl
	CGO_ENABLED=0 $(GO) build -o bin/flock-agent ./cmd/flock-agent

install: build
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 bin/flockctl bin/flock-agent $(DESTDIR)$(BINDIR)/

# deps installs only what is missing, so it is quick and offline when
# everything is there.
deps:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v nats >/dev/null || { echo "installing the nats CLI ($(NATSCLI))"; GOBIN=$(BINDIR) $(GO) install $(NATSCLI); }
	@$(MAKE) --no-print-directory runsc

runsc:
	@if [ ! -x $(RUNSC_CACHE)/runsc ]; then \
		echo "building runsc $(RUNSC_VERSION) (static, about 1.5 min once)"; \
		CGO_ENABLED=0 GOBIN=$(RUNSC_CACHE).tmp $(GO) install gvisor.dev/gvisor/runsc@$(RUNSC_VERSION) && \
		rm -rf $(RUNSC_CACHE) && mv $(RUNSC_CACHE).tmp $(RUNSC_CACHE); \
	fi
	@cmp -s $(RUNSC_CACHE)/runsc $(BINDIR)/runsc || install -D -m 0755 $(RUNSC_CACHE)/runsc $(BINDIR)/runsc

# demo provisions examples/flock.yaml: on the host when PID 1 is systemd,
# otherwise in a throw-away systemd machine (systemd-nspawn).
demo: deps build
	@if [ -d /run/systemd/system ]; then $(MAKE) install; fi
	$(GO) run ./test/demo -f examples/flock.yaml

test-unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -vE '/test(/|$$)')

# The VM tier (tests named TestVM*) runs in test-vm only, so nothing runs
# twice.
test-system: deps
	$(GO) test -count=1 -timeout 45m -v -skip '^TestVM' ./test/...

# A qemu VM per test, under software emulation: the first run builds the
# image (a few minutes; cached in /var/cache/flock-vm by its recipe). -p 1:
# one VM at a time, so two never share the two cores.
test-vm: deps
	$(GO) test -count=1 -timeout 60m -v -p 1 -run '^TestVM' ./test/...

# The spec parser under the fuzzer for a bounded time (longer locally:
# make test-fuzz FUZZTIME=10m). Failures land in spec/testdata/fuzz.
FUZZTIME ?= 60s
test-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./spec

test: deps test-unit test-fuzz test-system test-vm

# Figures against the floor measured in the same run; never a pass/fail.
bench: deps
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./bus/
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 3x ./test/...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
