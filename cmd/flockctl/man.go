package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newMan writes the man pages make deb packages: one per verb, from the
// same text as --help, so the two never disagree. Hidden: it is a build
// step, not an operator's verb.
func newMan() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write flockctl's man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMan(cmd.Root(), args[0])
		},
	}
}

// runMan writes the man pages of root's tree into dir.
func runMan(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root.DisableAutoGenTag = true // no date in the page: the same source makes the same package
	hdr := &doc.GenManHeader{Title: "FLOCKCTL", Section: "1", Source: "flock", Manual: "flock manual"}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("write the man pages into %s: %w", dir, err)
	}
	return nil
}
