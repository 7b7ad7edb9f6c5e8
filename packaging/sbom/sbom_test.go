package sbom

// Unit tier.

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

var product = Product{Name: "flock", Version: "0.1.0", Created: time.Unix(1767225600, 0)}

// built is what Go records of a program of flock's built for arch.
func built(arch string, deps ...*debug.Module) *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/flockrun/flock", Version: "v0.1.0"},
		Deps:      deps,
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOARCH", Value: arch}, {Key: "GOOS", Value: "linux"},
		},
	}
}

var (
	nats   = &debug.Module{Path: "github.com/nats-io/nats.go", Version: "v1.55.0", Sum: "h1:nats="}
	cobra  = &debug.Module{Path: "github.com/spf13/cobra", Version: "v1.10.2", Sum: "h1:cobra="}
	upper  = &debug.Module{Path: "github.com/BurntSushi/toml", Version: "v1.4.0"}
	forked = &debug.Module{Path: "example.com/dep", Version: "v1.0.0",
		Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: "h1:fork="}}
)

// TestNew: the programs, every module compiled into any of them once
// (sorted, the standard library among them), each program's own list of
// what it is made of, and what refuses to make a BOM.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bins       []Binary
		components []string // bom-refs, in order
		deps       map[string]string
		props      map[string]string // bom-ref → a property it has, "name=value"
		err        string
	}{
		{
			name: "two programs share modules",
			bins: []Binary{
				{Name: "flockctl", SHA256: "aa", Info: built("arm64", nats, cobra)},
				{Name: "flock-agent", SHA256: "bb", Info: built("arm64", nats)},
			},
			components: []string{"program:flockctl", "program:flock-agent",
				"pkg:golang/github.com/nats-io/nats.go@v1.55.0", "pkg:golang/github.com/spf13/cobra@v1.10.2", "pkg:golang/stdlib@1.26.8"},
			deps: map[string]string{
				"flock":               "program:flockctl program:flock-agent",
				"program:flockctl":    "pkg:golang/github.com/nats-io/nats.go@v1.55.0 pkg:golang/github.com/spf13/cobra@v1.10.2 pkg:golang/stdlib@1.26.8",
				"program:flock-agent": "pkg:golang/github.com/nats-io/nats.go@v1.55.0 pkg:golang/stdlib@1.26.8",
			},
			props: map[string]string{
				"program:flockctl":                          "go:build:GOARCH=arm64",
				"pkg:golang/github.com/spf13/cobra@v1.10.2": "go:sum=h1:cobra=",
			},
		},
		{
			name:       "a replaced module is its replacement; a path's capitals are lowered",
			bins:       []Binary{{Name: "flockctl", SHA256: "aa", Info: built("amd64", forked, upper)}},
			components: []string{"program:flockctl", "pkg:golang/example.com/fork@v1.0.1", "pkg:golang/github.com/burntsushi/toml@v1.4.0", "pkg:golang/stdlib@1.26.8"},
			props:      map[string]string{"pkg:golang/example.com/fork@v1.0.1": "go:replaces=example.com/dep@v1.0.0"},
		},
		{
			name: "programs of two architectures",
			bins: []Binary{{Name: "flockctl", Info: built("amd64")}, {Name: "flock-agent", Info: built("arm64")}},
			err:  "flock-agent is for linux/arm64, the others for linux/amd64",
		},
		{name: "no programs", err: "no programs"},
		{name: "no build info", bins: []Binary{{Name: "flockctl"}}, err: "flockctl: no Go build info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bom, err := New(product, tc.bins)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("New: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var refs []string
			for _, c := range bom.Components {
				refs = append(refs, c.BOMRef)
			}
			if got, want := strings.Join(refs, " "), strings.Join(tc.components, " "); got != want {
				t.Errorf("components\n got %s\nwant %s", got, want)
			}
			for _, d := range bom.Dependencies {
				if want, ok := tc.deps[d.Ref]; ok && strings.Join(d.DependsOn, " ") != want {
					t.Errorf("%s depends on %v, want %s", d.Ref, d.DependsOn, want)
				}
			}
			for ref, prop := range tc.props {
				if !hasProperty(bom, ref, prop) {
					t.Errorf("%s has no property %s", ref, prop)
				}
			}
			m := bom.Metadata
			if m.Component.Name != "flock" || m.Component.Version != "0.1.0" || m.Component.PURL != "pkg:golang/github.com/flockrun/flock@v0.1.0" ||
				m.Timestamp != "2026-01-01T00:00:00Z" {
				t.Errorf("metadata %+v", m)
			}
		})
	}
}

func hasProperty(bom BOM, ref, prop string) bool {
	for _, c := range bom.Components {
		for _, p := range c.Properties {
			if c.BOMRef == ref && p.Name+"="+p.Value == prop {
				return true
			}
		}
	}
	return false
}

// TestEncodeDecode: what Encode writes Decode reads back, the same BOM
// always encodes to the same bytes, and Decode refuses what is not a
// CycloneDX document.
func TestEncodeDecode(t *testing.T) {
	bins := []Binary{{Name: "flockctl", SHA256: "aa", Info: built("amd64", nats, cobra)}}
	var encoded [][]byte
	for range 2 {
		bom, err := New(product, bins)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Encode(bom)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, b)
	}
	if !bytes.Equal(encoded[0], encoded[1]) {
		t.Errorf("one BOM encoded to two documents:\n%s\n%s", encoded[0], encoded[1])
	}
	back, err := Decode(encoded[0])
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Encode(back); !bytes.Equal(again, encoded[0]) {
		t.Errorf("decoded and encoded again, it differs:\n%s", again)
	}
	for _, bad := range []string{`{"bomFormat":"SPDX"}`, `not json`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) accepted it", bad)
		}
	}
}

// TestRead reads this test's own binary, a Go program, and refuses a
// file that is none.
func TestRead(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(self)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != filepath.Base(self) || len(b.SHA256) != 64 || b.Info == nil || b.Info.GoVersion == "" {
		t.Errorf("Read(%s) = %+v", self, b)
	}
	text := filepath.Join(t.TempDir(), "notes")
	if err := os.WriteFile(text, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(text); err == nil || !strings.Contains(err.Error(), "no Go build info") {
		t.Errorf("Read(a text file): %v, want no Go build info", err)
	}
}
