package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// agentStatus is one row of `flockctl status`; its JSON keys are a contract.
type agentStatus struct {
	ID       int    `json:"id"`
	User     string `json:"user"`
	UID      uint32 `json:"uid"`
	Unit     string `json:"unit"`
	State    string `json:"state"` // systemd's ActiveState; "absent" if not loaded
	SubState string `json:"sub_state"`
	Role     string `json:"role"`
	Level    string `json:"level"`
	Label    string `json:"label"`
	// IPCScoped: the kernel keeps the agent's abstract UNIX sockets and
	// signals to itself (Landlock); false means they are shared host-wide.
	IPCScoped bool   `json:"ipc_scoped"`
	Drift     string `json:"drift,omitempty"`
}

func newStatus() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "status [-f FILE] [--output table|json]",
		Short: "Show every agent: its user, unit state and isolation level",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: choose table or json", output)
			}
			f, err := flockFor(file)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			h, uo, closeHost, err := openHost(ctx)
			if err != nil {
				return err
			}
			defer closeHost()
			sts, err := h.Units.List(ctx)
			if err != nil {
				return err
			}
			byName := map[string]units.Status{}
			for _, s := range sts {
				byName[s.Name] = s
			}
			scoped := agent.IPCScopesSupported()
			rows := make([]agentStatus, 0, len(f.Agents))
			for _, a := range f.Agents {
				row := statusOf(f, a, byName[spec.UnitName(a.ID)], units.ForAgent(f, a, uo).Hash)
				row.IPCScoped = scoped
				rows = append(rows, row)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			printTable(cmd.OutOrStdout(), rows)
			if !scoped {
				fmt.Fprintln(cmd.OutOrStdout(), "note: this kernel has no Landlock IPC scopes (Linux 6.12+): agents can reach each other's abstract UNIX sockets")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "spec to compare against (default: the last provisioned)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func flockFor(file string) (*spec.Flock, error) {
	if file != "" {
		return spec.Load(file)
	}
	return appliedFlock()
}

func statusOf(f *spec.Flock, a spec.Agent, st units.Status, wantHash string) agentStatus {
	row := agentStatus{
		ID: a.ID, User: spec.UserName(a.ID), UID: f.UID(a.ID), Unit: spec.UnitName(a.ID),
		State: st.ActiveState, SubState: st.SubState,
		Role: string(a.Role), Level: string(a.Level), Label: a.Level.Label(),
	}
	switch {
	case st.Name == "":
		row.State, row.Drift = "absent", "unit not loaded"
	case st.Hash != wantHash:
		row.Drift = "unit differs from spec"
	}
	return row
}

func printTable(w io.Writer, rows []agentStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tUID\tUNIT\tSTATE\tROLE\tLEVEL\tISOLATION\tDRIFT")
	for _, r := range rows {
		drift := r.Drift
		if drift == "" {
			drift = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s/%s\t%s\t%s\t%s\t%s\n",
			r.ID, r.User, r.UID, r.Unit, r.State, r.SubState, r.Role, r.Level, r.Label, drift)
	}
	tw.Flush()
}
