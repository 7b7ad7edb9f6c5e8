// Command sbom writes the CycloneDX SBOM of a release's programs for one
// architecture (package sbom): make release runs it on each tarball's
// binaries.
//
//	sbom -name flock -version 0.1.0 -epoch 1767225600 -o flock.cdx.json bin/flockctl bin/flock-agent
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/flockrun/flock/packaging/sbom"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	name := fs.String("name", "flock", "the product's name")
	version := fs.String("version", "", "the release's version, as its package says it (required)")
	epoch := fs.Int64("epoch", -1, "the source's time in Unix seconds, SOURCE_DATE_EPOCH (required: the same source gives the same SBOM)")
	out := fs.String("o", "", "the file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *version == "":
		return fmt.Errorf("sbom: -version is required: the release's version (make passes $(VERSION))")
	case *epoch < 0:
		return fmt.Errorf("sbom: -epoch is required: the source's time in Unix seconds (SOURCE_DATE_EPOCH)")
	case *out == "":
		return fmt.Errorf("sbom: -o is required: the file to write")
	case fs.NArg() == 0:
		return fmt.Errorf("sbom: name the programs: sbom [flags] BINARY...")
	}
	var bins []sbom.Binary
	for _, p := range fs.Args() {
		b, err := sbom.Read(p)
		if err != nil {
			return err
		}
		bins = append(bins, b)
	}
	bom, err := sbom.New(sbom.Product{Name: *name, Version: *version, Created: time.Unix(*epoch, 0)}, bins)
	if err != nil {
		return err
	}
	b, err := sbom.Encode(bom)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("sbom: %w", err)
	}
	return nil
}
