package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/audit"
	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/spec"
)

// auditDir holds the audit units' answers: root's alone.
const auditDir = "/run/flock-audit"

type auditOpts struct {
	stdio
	output string
	args   []string
}

func newAudit() *cobra.Command {
	var o auditOpts
	cmd := &cobra.Command{
		Use:   "audit [ID] [--output text|json]",
		Short: "Run flock's hostile probes as each agent inside its real sandbox, with controls, drift and exposure (as root); exits non-zero on any escape",
		Long: `audit runs flock's own hostile suite as each agent (or agent ID), inside that
agent's real unit: the same user, paths, credential, walls and container, in a
second transient unit flock-audit@ID.service that runs flock-agent's probe mode
instead of the agent's program, and is removed after. Another agent of the
flock is the victim (its files, log, credential, process and bus subjects)
and the colluder: in flock-audit@PEER-peer.service, its own unit the same
way, it opens loopback ports, an abstract and a path UNIX socket, SysV and
POSIX IPC, files in /tmp and /dev/shm, and holds them while the agent tries
to reach them; root opens the same channels for the controls.

Every probe also runs as root outside every unit, where its protection is
absent, and must work there: a probe refused in both places proves nothing
and is "unproven". Walls the level cannot close on this kernel are "open
(known: why)", not escapes. Drift, exposure and gaps are explain's.

Exits non-zero on any ESCAPED or unproven probe, any drift, or an agent that
could not be audited.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdio, o.args = stdioOf(cmd), args
			return runAudit(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

func runAudit(ctx context.Context, o auditOpts) error {
	if err := checkOutput(o.output, "text", "json"); err != nil {
		return err
	}
	var ids []int
	if len(o.args) == 1 {
		id, err := strconv.Atoi(o.args[0])
		if err != nil || id <= 0 {
			return fmt.Errorf("agent %q: an id is a positive number, as in the spec (flockctl status lists them)", o.args[0])
		}
		ids = []int{id}
	}
	if os.Geteuid() != 0 {
		return errors.New("flockctl audit starts units as the agents and must run as root (try sudo)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// One audit at a time, and none during a provision: audits
	// share their unit names and /run/flock-audit, and a flock
	// changing under an audit would read as drift.
	unlock, err := lockHost(o.errOut)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := auditAgents(ctx, ids)
	if err != nil {
		return err
	}
	if o.output == "json" {
		if err := printJSON(o.out, r); err != nil {
			return err
		}
	} else {
		r.WriteText(o.out)
	}
	if r.Failing() {
		return fmt.Errorf("audit failed: %d escaped, %d unproven, %d drift, %d agents not audited", r.Escaped, r.Unproven, r.Drift, r.Errors)
	}
	return nil
}

// auditAgents audits agents ids of the provisioned flock (none: every
// agent of this host) in their units.
func auditAgents(ctx context.Context, ids []int) (audit.Report, error) {
	f, err := appliedFlock()
	if err != nil {
		return audit.Report{}, err
	}
	for _, id := range ids {
		if !hasAgent(f, id) {
			return audit.Report{}, fmt.Errorf("agent %d: %w; see flockctl status", id, explain.ErrUnknownAgent)
		}
	}
	w, err := whereFor(f, "", true)
	if err != nil {
		return audit.Report{}, err
	}
	for _, id := range ids {
		if a, _ := f.Agent(id); f.Clustered() && a.Host != w.site.Host {
			return audit.Report{}, fmt.Errorf("agent %d runs on host %s, not on this one (%s): audit it there", id, a.Host, w.site.Host)
		}
	}
	s, err := setUp(ctx, f, w, false)
	if err != nil {
		return audit.Report{}, err
	}
	defer s.close()
	if err := os.MkdirAll(auditDir, 0o700); err != nil {
		return audit.Report{}, err
	}
	defer os.RemoveAll(auditDir)
	c, closeColluder, err := openColluder()
	defer closeColluder()
	if err != nil {
		return audit.Report{}, err
	}
	var scratch []string
	for _, a := range f.Agents {
		if len(ids) > 0 && ids[0] != a.ID {
			continue
		}
		peer := audit.Peer(f, a.ID)
		if peer != 0 {
			if err := writeCanaries(f, peer); err != nil {
				return audit.Report{}, err
			}
			read, move := audit.Canaries(f, peer)
			scratch = append(scratch, read, move, move+".moved")
		}
		scratch = append(scratch, audit.Scratch(f, a, audit.Target{Peer: peer})...)
	}
	defer func() {
		for _, p := range scratch {
			os.Remove(p)
		}
	}()
	sources := s.explainSources(bus.NewSystem())
	// The model APIs' keys: what each agent must find nowhere.
	keys, err := audit.ReadModelKeys(f)
	if err != nil {
		return audit.Report{}, err
	}
	// The granted secrets: what each agent granted one must find nowhere.
	held, err := audit.ReadSecrets(f, f.On(w.site.Host))
	if err != nil {
		return audit.Report{}, err
	}
	host := audit.Host{
		Units: s.host.Units, Options: s.opts, OutDir: auditDir, ModelKeys: keys, Secrets: held,
		ReadOutput: os.ReadFile,
		Control:    func(reqs []probe.Request) []probe.Result { return probe.RunAll(reqs, probe.ControlTimeout) },
		Explain: func(ctx context.Context, id int) (explain.Report, error) {
			return explain.Live(ctx, sources, s.want, id)
		},
	}
	return audit.Run(ctx, host, f, ids, c), nil
}

func hasAgent(f *spec.Flock, id int) bool {
	for _, a := range f.Agents {
		if a.ID == id {
			return true
		}
	}
	return false
}

// writeCanaries are the peer's files the probes aim at: owned by the
// peer and world-readable, so only isolation stops another agent.
func writeCanaries(f *spec.Flock, peer int) error {
	uid := int(f.UID(peer))
	read, move := audit.Canaries(f, peer)
	for _, p := range []string{read, move} {
		if err := os.WriteFile(p, []byte("flock audit canary of agent "+strconv.Itoa(peer)+"\n"), 0o644); err != nil {
			return fmt.Errorf("audit canary: %w", err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return fmt.Errorf("audit canary: %w", err)
		}
	}
	return nil
}

// openColluder opens, as root in the host's namespaces, the channels a
// colluding process would offer; they live as long as this process, and
// close removes what outlives it.
func openColluder() (audit.Colluder, func(), error) {
	pid := os.Getpid()
	c := audit.NewColluder("flock-audit-"+strconv.Itoa(pid), pid)
	closeFn := func() {
		os.Remove(c.UnixTmp)
		for _, p := range c.Files {
			os.Remove(p)
		}
		if id, err := unix.SysvShmGet(c.ShmKey, 0, 0); err == nil {
			unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
		if id, _, errno := unix.Syscall(unix.SYS_MSGGET, uintptr(c.MsgKey), 0, 0); errno == 0 {
			unix.Syscall(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0)
		}
		if p, err := unix.BytePtrFromString(strings.TrimPrefix(c.MQName, "/")); err == nil {
			unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0)
		}
	}
	c, failed, err := c.Opened(probe.RunAll(c.Opens(), probe.ControlTimeout))
	if err == nil && len(failed) > 0 {
		err = errors.New(strings.Join(failed, "; "))
	}
	if err != nil { // the controls: root must open every one
		return c, closeFn, fmt.Errorf("audit: opening root's channels: %w", err)
	}
	return c, closeFn, nil
}
