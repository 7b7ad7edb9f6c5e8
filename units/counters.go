package units

import (
	"bytes"
	"strings"
	"text/template"

	"github.com/flockrun/flock/counters"
)

// CountersSocket and CountersTemplate are the firewall's counters reader
// for /metrics (package counters): systemd listens, and for each
// connection starts an instance of the template, `flockctl counters`,
// which answers and exits. Only the bus's user may connect. Provision
// installs them while bus.metrics is on.
const (
	CountersSocket   = "flock-counters.socket"
	CountersTemplate = "flock-counters@.service"
)

// isTemplate: a template is a file only; systemd has no state of it
// (its instances have theirs), so it is neither enabled nor started.
func isTemplate(name string) bool { return strings.HasSuffix(name, "@.service") }

// countersSocketText: the socket belongs to the bus's user, mode 0600, in
// /run (which agents see read-only and, not being that user, cannot
// connect to). One process per connection (Accept=yes); the bus asks at
// most once a second, so the limits are far above what it needs and far
// below what could hurt.
var countersSocketText = `# Written by flockctl provision; flockctl deprovision --all removes it.
[Unit]
Description=flock firewall counters: the per-agent refusals flock.service's /metrics reads
Documentation=https://github.com/flockrun/flock

[Socket]
ListenStream=` + counters.SocketPath + `
SocketUser=` + BusUser + `
SocketGroup=` + BusUser + `
SocketMode=0600
RemoveOnStop=yes
Accept=yes
MaxConnections=4

[Install]
WantedBy=sockets.target
`

// countersTemplate is the reader: CAP_NET_ADMIN (reading table inet
// flock takes it) and nothing else. A dynamic user, not root; in the
// host's network namespace and user namespace (PrivateNetwork= or
// PrivateUsers= would give it a namespace of its own, whose nftables it
// would read); only netlink sockets; no address of any family.
var countersTemplate = template.Must(template.New(CountersTemplate).Parse(`# Written by flockctl provision; flockctl deprovision --all removes it.
[Unit]
Description=flock firewall counters reader: one answer on ` + CountersSocket + `
Documentation=https://github.com/flockrun/flock

[Service]
ExecStart={{.Bin}} counters
StandardInput=socket
StandardOutput=journal
StandardError=journal
# A reader per scrape: systemd's lines on each start and end (info) would
# fill the journal, two every scrape. Failures stay (notice and up), and
# the reader writes only when it fails: at warning.
LogLevelMax=notice
SyslogLevel=warning
RuntimeMaxSec=15
DynamicUser=yes
User=flock-counters
AmbientCapabilities=CAP_NET_ADMIN
` + strings.Replace(ownWalls, "CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_NET_ADMIN\n", 1) + `PrivateIPC=yes
ProtectProc=invisible
ProcSubset=pid
RemoveIPC=yes
` + kernelWalls + `SystemCallFilter=~@privileged @resources
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_NETLINK
IPAddressDeny=any
DevicePolicy=closed
`))

// CountersSocketUnit is the text of CountersSocket.
func CountersSocketUnit() []byte { return []byte(countersSocketText) }

// CountersService is the text of CountersTemplate, running bin. It names
// no build: each connection starts the flockctl installed then, so a new
// one needs no new file.
func CountersService(bin string) []byte {
	if bin == "" {
		bin = DefaultFlockctlBin
	}
	var b bytes.Buffer
	if err := countersTemplate.Execute(&b, struct{ Bin string }{bin}); err != nil {
		panic(err) // the template and its strings cannot fail
	}
	return b.Bytes()
}
