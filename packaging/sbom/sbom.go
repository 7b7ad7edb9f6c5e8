// Package sbom is the software bill of materials of a release: the Go
// modules compiled into each program, as the Go toolchain recorded them in
// the binary (what `go version -m` prints), rendered as CycloneDX 1.5
// JSON. Nothing is looked up: the binaries are the only source, so the
// SBOM says what was built, not what go.mod asked for, and the same
// binaries give the same bytes.
package sbom

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Binary is one program: its file's name and SHA-256, and what Go
// recorded in it.
type Binary struct {
	Name   string
	SHA256 string // hex
	Info   *debug.BuildInfo
}

// Read reads the program at path.
func Read(path string) (Binary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Binary{}, fmt.Errorf("sbom: %w", err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Binary{}, fmt.Errorf("sbom: %s has no Go build info (a Go program built with modules?): %w", path, err)
	}
	sum := sha256.Sum256(b)
	return Binary{Name: filepath.Base(path), SHA256: hex.EncodeToString(sum[:]), Info: info}, nil
}

// BOM is the subset of a CycloneDX 1.5 document this package writes.
type BOM struct {
	Format       string       `json:"bomFormat"`   // "CycloneDX"
	SpecVersion  string       `json:"specVersion"` // "1.5"
	Version      int          `json:"version"`     // of this BOM: 1
	Metadata     Metadata     `json:"metadata"`
	Components   []Component  `json:"components"`
	Dependencies []Dependency `json:"dependencies"`
}

// Metadata says what the BOM describes and when it was built.
type Metadata struct {
	Timestamp  string     `json:"timestamp"` // the source's time, RFC 3339 UTC
	Component  Component  `json:"component"`
	Properties []Property `json:"properties,omitempty"`
}

// Component is a program (type application) or a Go module (library).
type Component struct {
	Type       string     `json:"type"`
	BOMRef     string     `json:"bom-ref"`
	Name       string     `json:"name"`
	Version    string     `json:"version"`
	PURL       string     `json:"purl,omitempty"`
	Hashes     []Hash     `json:"hashes,omitempty"`
	Properties []Property `json:"properties,omitempty"`
}

// Hash is a file's digest.
type Hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

// Property is a name and a value CycloneDX has no field for.
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Dependency says which components a component is made of.
type Dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// Product names what the BOM describes: the release of name at version
// (as its package says it), built at created.
type Product struct {
	Name    string
	Version string
	Created time.Time
}

// New is the BOM of bins, the programs of one release for one
// architecture: each program and every module compiled into any of them,
// Go's standard library among them.
func New(p Product, bins []Binary) (BOM, error) {
	if len(bins) == 0 {
		return BOM{}, fmt.Errorf("sbom: no programs: name the binaries of the release")
	}
	bom := BOM{Format: "CycloneDX", SpecVersion: "1.5", Version: 1}
	top := Component{Type: "application", BOMRef: p.Name, Name: p.Name, Version: p.Version}
	modules := map[string]Component{}
	var target string
	var tops []string
	for _, b := range bins {
		if b.Info == nil {
			return BOM{}, fmt.Errorf("sbom: %s: no Go build info", b.Name)
		}
		settings := map[string]string{}
		app := Component{Type: "application", BOMRef: "program:" + b.Name, Name: b.Name, Version: p.Version,
			Hashes: []Hash{{Alg: "SHA-256", Content: b.SHA256}}}
		for _, s := range b.Info.Settings {
			settings[s.Key] = s.Value
			app.Properties = append(app.Properties, Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
		arch := settings["GOOS"] + "/" + settings["GOARCH"]
		if target != "" && arch != target {
			return BOM{}, fmt.Errorf("sbom: %s is for %s, the others for %s: one BOM per architecture", b.Name, arch, target)
		}
		target = arch
		if top.PURL == "" && b.Info.Main.Path != "" {
			top.PURL = purl(b.Info.Main.Path, b.Info.Main.Version)
		}
		deps := []string{}
		std := Component{Type: "library", Name: "stdlib", Version: b.Info.GoVersion,
			PURL: purl("stdlib", strings.TrimPrefix(b.Info.GoVersion, "go"))}
		std.BOMRef = std.PURL
		for _, c := range append(moduleComponents(b.Info.Deps), std) {
			modules[c.BOMRef] = c
			deps = append(deps, c.BOMRef)
		}
		sort.Strings(deps)
		bom.Components = append(bom.Components, app)
		bom.Dependencies = append(bom.Dependencies, Dependency{Ref: app.BOMRef, DependsOn: deps})
		tops = append(tops, app.BOMRef)
	}
	refs := make([]string, 0, len(modules))
	for ref := range modules {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		bom.Components = append(bom.Components, modules[ref])
	}
	bom.Dependencies = append([]Dependency{{Ref: top.BOMRef, DependsOn: tops}}, bom.Dependencies...)
	bom.Metadata = Metadata{
		Timestamp:  p.Created.UTC().Format(time.RFC3339),
		Component:  top,
		Properties: []Property{{Name: "go:target", Value: target}},
	}
	return bom, nil
}

// moduleComponents are the modules Go recorded, each as it was built:
// a replaced module is its replacement, naming the one it replaces.
func moduleComponents(deps []*debug.Module) []Component {
	var out []Component
	for _, m := range deps {
		built := m
		var props []Property
		if m.Replace != nil {
			built = m.Replace
			props = []Property{{Name: "go:replaces", Value: m.Path + "@" + m.Version}}
		}
		c := Component{Type: "library", Name: built.Path, Version: built.Version, PURL: purl(built.Path, built.Version), Properties: props}
		if built.Sum != "" {
			c.Properties = append(c.Properties, Property{Name: "go:sum", Value: built.Sum})
		}
		c.BOMRef = c.PURL
		out = append(out, c)
	}
	return out
}

// purl is a Go module's package URL: the purl spec's golang type wants
// the path lowercased; a module without a version (a local replacement,
// "(devel)") has none in its URL.
func purl(path, version string) string {
	u := "pkg:golang/" + strings.ToLower(path)
	if version != "" && version != "(devel)" {
		u += "@" + version
	}
	return u
}

// Encode is the BOM as the file make release writes: indented JSON,
// ending in a newline.
func Encode(b BOM) ([]byte, error) {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return append(out, '\n'), nil
}

// Decode reads what Encode wrote.
func Decode(data []byte) (BOM, error) {
	var b BOM
	if err := json.Unmarshal(data, &b); err != nil {
		return BOM{}, fmt.Errorf("sbom: not a CycloneDX JSON document: %w", err)
	}
	if b.Format != "CycloneDX" {
		return BOM{}, fmt.Errorf("sbom: bomFormat %q, want CycloneDX", b.Format)
	}
	return b, nil
}
