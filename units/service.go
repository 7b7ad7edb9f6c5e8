package units

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"text/template"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/spec"
)

// BusUnit is the static unit of the bus, `flockctl serve`. It is a file
// (not transient) so it is enabled and comes back at boot.
const BusUnit = "flock.service"

// DefaultUnitDir is where provision writes BusUnit.
const DefaultUnitDir = "/etc/systemd/system"

// DefaultFlockctlBin is where `make install` puts flockctl.
const DefaultFlockctlBin = "/usr/local/bin/flockctl"

// BusStateDirs are where systemd keeps BusUnit's StateDirectory=flock-bus
// (the bus's tasks, results and dead letters): a DynamicUser unit's lives
// under /var/lib/private, reached through a symlink.
var BusStateDirs = []string{"/var/lib/private/flock-bus", "/var/lib/flock-bus"}

// ServiceStatus is flock.service as the host has it.
type ServiceStatus struct {
	File        []byte // the unit file as installed; nil if there is none
	Enabled     string // systemd's UnitFileState: enabled, disabled, ...
	ActiveState string // active, activating, failed, inactive...
	// NoAccount: the unit file is there but its static account
	// (BusUnit's BusUser) is not, so systemd would give it a dynamic
	// user, which dbus-daemon drops (account.go).
	NoAccount bool
	// RestartOwed: provision installed a changed file for the running
	// unit and was stopped before it restarted it (owed.go), so it runs
	// its former file.
	RestartOwed bool
}

// busTemplate: Type=notify, so a start job finishes only once the bus
// accepts connections. It runs as an unprivileged user (DynamicUser=, on a
// static account: account.go) with no capabilities: it needs nothing but
// its loopback ports, its (public-key only) config and the system bus.
var busTemplate = template.Must(template.New(BusUnit).Parse(`# Written by flockctl provision; flockctl deprovision --all removes it.
{{if .Build}}# flockctl build {{.Build}}: a new flockctl rewrites this file and restarts the bus.
{{end}}[Unit]
Description=flock bus: the embedded NATS server the flock's agents talk through
Documentation=https://github.com/flockrun/flock
# Never give up restarting the bus: agents wait for it.
StartLimitIntervalSec=0

[Service]
Type=notify
ExecStart={{.Bin}} serve --config {{.Config}}
# Once the bus is ready, as root ("+"): re-create the agents' transient
# units and the firewall from the last provisioned state (they do not
# survive a reboot). The unit is active only when that is done.
ExecStartPost=+{{.Bin}} reconcile
ExecReload=/bin/kill -HUP $MAINPID
TimeoutStartSec=5min
Restart=always
RestartSec=1
# Named: the default (the unit's name) would collide with the agents' group
# "flock". A static account (` + BusSysusersPath + `, which provision
# writes): dbus-daemon drops peers whose user is dynamic, and /metrics reads
# the agents' units over the system bus.
DynamicUser=yes
User=` + BusUser + `
StateDirectory=flock-bus
{{if .Creds}}# The cluster's certificates, key and route password: root's files (0600
# in a 0700 directory), which systemd hands the bus alone, read-only.
{{range .Creds}}LoadCredential={{.Name}}:{{.Path}}
{{end}}{{end}}` + busBounds + ownWalls + `PrivateUsers=yes
ProtectProc=invisible
` + kernelWalls + `SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX

[Install]
WantedBy=multi-user.target
`))

// The bounds of flock's services (docs/design.md, "Shares"). Their file
// limits are spec's (the agents' shares are validated against them).
// Memory and tasks: the bus with a thousand agents connected peaked at
// 175 MiB resident with 9 threads (TestThousandAgents); MemoryHigh holds
// that, JetStream's 64 MiB and four agents at their whole pending share
// (8 connections × 16 MiB). A tunnel through the proxy measured at most
// 104 KiB (with both TLS ends in the same process): a thousand agents at
// 16 tunnels each fit in its MemoryMax. Threads are far above need (Go
// dies when it cannot make one). Over MemoryHigh the kernel reclaims and
// slows the service; at MemoryMax it kills it, and systemd starts it
// again a second later: the bus with every stored task (on disk), its
// agents reconnecting.
const (
	BusMemoryHigh   = 768 << 20
	BusMemoryMax    = 1 << 30
	BusTasksMax     = 1024
	ProxyMemoryHigh = 512 << 20
	ProxyMemoryMax  = 1 << 30
	ProxyTasksMax   = 512
)

var (
	busBounds   = bounds("connections", spec.BusFiles, BusMemoryHigh, BusMemoryMax, BusTasksMax)
	proxyBounds = bounds("tunnels", spec.ProxyFiles, ProxyMemoryHigh, ProxyMemoryMax, ProxyTasksMax)
)

func bounds(share string, files, high, max, tasks int) string {
	return fmt.Sprintf(`# Bounded: the agents' shares of %s fit in its files (provision
# refuses a spec where they would not); memory and tasks hold a thousand
# agents with room. At MemoryMax the kernel kills it and it starts again.
LimitNOFILE=%d
MemoryHigh=%dM
MemoryMax=%dM
TasksMax=%d
`, share, files, high>>20, max>>20, tasks)
}

// ownWalls are the first walls of flock's own services (the bus, the
// proxy): no capabilities, no new privileges, a read-only system, no home,
// their own /tmp and no devices.
const ownWalls = `UMask=0077
CapabilityBoundingSet=
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
`

// kernelWalls are the walls of flock's own services (the bus, the proxy)
// that keep them from the kernel's settings, other namespaces and
// privileged system calls: written once for both unit files.
const kernelWalls = `ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
`

// busBuildRe finds the build busTemplate writes in its first comment.
var busBuildRe = regexp.MustCompile(`(?m)^# flockctl build ([0-9a-f]+):`)

// BusBuild is the flockctl build a flock.service file says it runs ("":
// it does not say).
func BusBuild(file []byte) string { return submatch(busBuildRe, file) }

// BusService is the text of flock.service for a bus reading configPath,
// run by the flockctl of build id build ("" unknown). creds are files the
// bus reads as systemd credentials (a multi-host flock's cluster
// material), each by its base name in $CREDENTIALS_DIRECTORY.
func BusService(bin, build, configPath string, creds ...string) []byte {
	if bin == "" {
		bin = DefaultFlockctlBin
	}
	var b bytes.Buffer
	type cred struct{ Name, Path string }
	data := struct {
		Bin, Build, Config string
		Creds              []cred
	}{Bin: bin, Build: build, Config: configPath}
	for _, c := range creds {
		data.Creds = append(data.Creds, cred{filepath.Base(c), c})
	}
	if err := busTemplate.Execute(&b, data); err != nil {
		panic(err) // the template and its two strings cannot fail
	}
	return b.Bytes()
}

// StaticUnits are the static units flock installs; nothing else is
// written, started or removed through the Service methods. A template
// (CountersTemplate) is a file only: Service reads it, InstallService
// writes it without enabling, RemoveService deletes it; it is never
// started itself.
var StaticUnits = []string{BusUnit, ProxyUnit, CountersSocket, CountersTemplate}

func checkStatic(name string) error {
	for _, u := range StaticUnits {
		if u == name {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of flock's static units %v", name, StaticUnits)
}

// checkStarted is checkStatic for what only a unit with a state of its
// own can do (start, restart, reload): not a template.
func checkStarted(name string) error {
	if err := checkStatic(name); err != nil {
		return err
	}
	if isTemplate(name) {
		return fmt.Errorf("%s is a template: its instances start by themselves", name)
	}
	return nil
}

func (s *Systemd) unitPath(name string) string { return filepath.Join(s.unitDir(), name) }

func (s *Systemd) unitDir() string {
	if s.UnitDir != "" {
		return s.UnitDir
	}
	return DefaultUnitDir
}

func (s *Systemd) Service(ctx context.Context, name string) (ServiceStatus, error) {
	var st ServiceStatus
	if err := checkStatic(name); err != nil {
		return st, err
	}
	data, err := os.ReadFile(s.unitPath(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return st, fmt.Errorf("reading %s: %w", s.unitPath(name), err)
	default:
		st.File = data
		st.NoAccount = !hasAccount(name)
	}
	if isTemplate(name) {
		return st, nil
	}
	props, err := s.conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return st, fmt.Errorf("reading %s's state: %w", name, err)
	}
	st.Enabled, _ = props["UnitFileState"].(string)
	st.ActiveState, _ = props["ActiveState"].(string)
	if st.RestartOwed, err = s.owed(name); err != nil {
		return st, err
	}
	return st, nil
}

func (s *Systemd) InstallService(ctx context.Context, name string, content []byte) error {
	if err := checkStatic(name); err != nil {
		return err
	}
	if err := ensureAccount(ctx, name); err != nil {
		return err
	}
	path := s.unitPath(name)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if !bytes.Equal(old, content) {
		if err := renameio.WriteFile(path, content, 0o644, renameio.WithStaticPermissions(0o644)); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := s.conn.ReloadContext(ctx); err != nil {
			return fmt.Errorf("daemon-reload after writing %s: %w", path, err)
		}
	}
	if isTemplate(name) {
		return nil
	}
	if _, _, err := s.conn.EnableUnitFilesContext(ctx, []string{name}, false, true); err != nil {
		return fmt.Errorf("enabling %s: %w", name, err)
	}
	return nil
}

func (s *Systemd) RestartService(ctx context.Context, name string) error {
	if err := checkStarted(name); err != nil {
		return err
	}
	done := make(chan string, 1)
	if _, err := s.conn.RestartUnitContext(ctx, name, "replace", done); err != nil {
		return fmt.Errorf("RestartUnit %s: %w", name, err)
	}
	if err := s.waitJob(ctx, name, "restart", done); err != nil {
		return err
	}
	return s.paid(name)
}

func (s *Systemd) ReloadService(ctx context.Context, name string) error {
	if err := checkStarted(name); err != nil {
		return err
	}
	done := make(chan string, 1)
	if _, err := s.conn.ReloadUnitContext(ctx, name, "replace", done); err != nil {
		return fmt.Errorf("ReloadUnit %s: %w", name, err)
	}
	return s.waitJob(ctx, name, "reload", done)
}

// StopService stops one of flock's static units and leaves it installed
// and enabled (flockctl store quarantine stops the bus to move its store).
func (s *Systemd) StopService(ctx context.Context, name string) error {
	if err := checkStatic(name); err != nil {
		return err
	}
	return s.stop(ctx, name)
}

func (s *Systemd) RemoveService(ctx context.Context, name string) error {
	if err := checkStatic(name); err != nil {
		return err
	}
	// Not Stop: an enabled unit with a file stays loaded, so waiting for
	// systemd to forget it would wait out unloadWait every time. A
	// template's instances end by themselves (RuntimeMaxSec=).
	if !isTemplate(name) {
		if err := s.stop(ctx, name); err != nil {
			return err
		}
		if err := s.paid(name); err != nil {
			return err
		}
	}
	if err := removeAccount(ctx, name); err != nil {
		return err
	}
	path := s.unitPath(name)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !isTemplate(name) {
		if _, err := s.conn.DisableUnitFilesContext(ctx, []string{name}, false); err != nil {
			return fmt.Errorf("disabling %s: %w", name, err)
		}
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if err := s.conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload after removing %s: %w", path, err)
	}
	return nil
}
