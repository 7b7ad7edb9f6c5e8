package test

// Tier: package (make, Go; go-licenses through the Go module proxy).
// make licenses-check, which make deb and make test-unit run, on flock
// and on fixtures: a module that imports one dependency under a license.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// TestLicensesCheck: flock's programs pass, and a dependency under the
// GPL (restricted), under terms of its own (not recognized) or with no
// license at all fails the check, which names it and its license; one
// under the MIT license passes, so the check does not fail everything.
func TestLicensesCheck(t *testing.T) {
	harness.PackageTier.Require(t)
	gpl, err := os.ReadFile("/usr/share/common-licenses/GPL-3") // base-files: on every Debian
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, license string
		want          string // in the output of a refusal; "" passes
	}{
		{"flock's programs", "", ""},
		{"MIT", mitLicense, ""},
		{"GPL-3.0", string(gpl), "License 'GPL-3.0' of not allowed license type 'Restricted' found for library 'example.com/dep'"},
		{"terms of its own", "Copyright 2026 Example Corp. All rights reserved.\nNo part of it may be used without written permission.\n",
			"Did not find license for library 'example.com/dep'"},
		{"none", "-", "Did not find license for library 'example.com/dep'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"make", "--no-print-directory", "licenses-check"}
			if tc.license != "" {
				args = append(args, "LICENSES_DIR="+fixtureModule(t, tc.license), "LICENSED=.")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := harness.RunInRepo(ctx, os.Environ(), args...)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v\n%s", err, out)
			case tc.want != "" && err == nil:
				t.Errorf("make licenses-check passed a dependency under %s:\n%s", tc.name, out)
			case tc.want != "" && !strings.Contains(out, tc.want):
				t.Errorf("make licenses-check refused, but without %q:\n%s", tc.want, out)
			}
		})
	}
}

// fixtureModule writes a module whose program imports example.com/dep,
// a local module with the given LICENSE ("-": none); its own license is
// flock's.
func fixtureModule(t *testing.T, license string) string {
	t.Helper()
	dir := t.TempDir()
	own, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":      "module example.com/app\n\ngo 1.26\n\nrequire example.com/dep v0.0.0\n\nreplace example.com/dep => ./dep\n",
		"main.go":     "package main\n\nimport _ \"example.com/dep\"\n\nfunc main() {}\n",
		"LICENSE":     string(own),
		"dep/go.mod":  "module example.com/dep\n\ngo 1.26\n",
		"dep/dep.go":  "package dep\n",
		"dep/LICENSE": license,
	}
	if license == "-" {
		delete(files, "dep/LICENSE")
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const mitLicense = `MIT License

Copyright (c) 2026 Example

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`
