// Command flockctl is the operator's tool: provision a flock from a spec,
// see it, read its logs, and take it away again.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	code, say := exitFor(err)
	if say {
		fmt.Fprintln(os.Stderr, "flockctl:", err)
	}
	if code != exitOK {
		stop()
		os.Exit(int(code))
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "flockctl",
		Short: "Run a flock of AI agents, each as its own user in its own hardened systemd unit",
		Long: `flockctl runs a flock of AI agents on one Linux host: every agent is its
own Unix user (flock-N) in its own hardened transient systemd unit
(flock-agent@N.service), sees its own directory and the shared one, and
its sockets reach nothing but the flock's bus (an embedded NATS server,
flock.service) and what its spec allows (nftables table inet flock).

  flockctl provision -f flock.yaml    make the host match the spec
  flockctl plan -f flock.yaml         what provision would do, anywhere
  flockctl status                     units, bus connections, heartbeats
  flockctl send "a task"              hand a worker a task, print its result
  flockctl deprovision --all --purge  remove everything flock made

The README says where to start, and docs/ has a page per topic: the spec
(docs/spec.md), each verb (docs/cli/), troubleshooting; installed from the
package, in /usr/share/doc/flock/.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what flockctl version prints.
		Version: version.Get("flockctl").String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newProvision(), newPlan(), newState(), newStatus(), newSend(), newLogs(), newDeprovision(), newExplain(), newServe(), newProxy(), newReconcile(), newTasks(), newUsage(), newAudit(), newEvents(), newVersion(), newCluster(), newStore(), newMan(), newCounters())
	return root
}

// Each verb is a constructor that binds its flags to its options and a
// runX(ctx, opts) that does the work, so what a verb does reads apart
// from cobra's wiring.

// stdio is where a verb reads and writes: its input, its output, and the
// notes and errors beside it.
type stdio struct {
	in          io.Reader
	out, errOut io.Writer
}

func stdioOf(cmd *cobra.Command) stdio {
	return stdio{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
}

// checkOutput refuses an --output a verb does not print, naming those it
// does.
func checkOutput(got string, forms ...string) error {
	if slices.Contains(forms, got) {
		return nil
	}
	return fmt.Errorf("--output %q: choose %s", got, strings.Join(forms, " or "))
}

// printJSON writes v as one indented JSON document: what --output json
// prints.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
