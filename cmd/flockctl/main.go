// Command flockctl is the operator's tool: provision a flock from a spec,
// see it, read its logs, and take it away again.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flockctl:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "flockctl",
		Short:         "Run a flock of AI agents, each as its own user in its own hardened systemd unit",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newProvision(), newStatus(), newSend(), newLogs(), newDeprovision(), newExplain(), newServe(), newProxy(), newReconcile(), newTasks(), newAudit(), newVersion(), newMan())
	return root
}
