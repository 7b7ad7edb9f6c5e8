# flock: build, install, demo and the test tiers. Every target that needs
# packages installs what is missing from Debian's archive first.

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
# Debian packages the system tiers use: nspawn for the booted systemd
# machine, nft for the firewall, ip/nsenter/setpriv/ps for the tests; for
# the VM tier qemu, debootstrap and mkfs.ext4 (the image) and ssh (into
# it); ansible-core and vagrant for ansible/ and the Vagrantfile.
DEBS    := systemd systemd-container nftables iproute2 util-linux procps passwd dbus \
	qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client \
	ansible-core vagrant
# The nats CLI: the system tests prove that a client an agent brings
# connects with NATS_URL and its credential alone. Built through the Go
# module proxy (Debian has no package of it); ~40 s once.
NATSCLI := github.com/nats-io/natscli/nats@v0.5.1
export PATH := $(dir $(GO)):$(PATH)

.PHONY: all build install deps demo test test-unit test-fuzz test-system test-vm bench fmt vet clean

all: build

build:
	$(GO) build -o bin/flockctl ./cmd/flockctl
	$(GO) build -o bin/flock-agent ./cmd/flock-agent

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
