package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newMan writes the man pages make deb packages, or with --markdown the
// CLI reference in docs/cli (make docs): one page per verb, from the same
// text as --help, so none of them disagrees with it. Hidden: it is a build
// step, not an operator's verb.
func newMan() *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:    "man DIR",
		Short:  "Write flockctl's man pages (section 1), or its Markdown reference, into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if markdown {
				return runMarkdown(cmd.Root(), args[0])
			}
			return runMan(cmd.Root(), args[0])
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "write Markdown pages (docs/cli) instead, replacing the flockctl*.md pages there")
	return cmd
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

// runMarkdown writes the Markdown pages of root's tree into dir, after
// removing the ones there, so a verb gone from the tree leaves no page.
func runMarkdown(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "flockctl*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	root.DisableAutoGenTag = true // no date: the same commands make the same pages
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("write the Markdown pages into %s: %w", dir, err)
	}
	return nil
}
