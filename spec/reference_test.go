package spec

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Tier: unit. The spec reference (docs/spec.md) cannot drift from the
// parser: it has a row for every field the parser accepts and none for a
// field it refuses, and every spec it shows parses.

const reference = "../docs/spec.md"

// fieldRow is a row of a reference table: its first cell a field's path.
var fieldRow = regexp.MustCompile("(?m)^\\| `([a-z_.\\[\\]<>]+)` \\|")

// yamlBlock is a fenced YAML block: on the reference page, a whole spec.
var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```$")

func readReference(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReferenceListsEveryFieldTheParserAccepts(t *testing.T) {
	page := readReference(t)
	var documented []string
	for _, m := range fieldRow.FindAllStringSubmatch(page, -1) {
		if slices.Contains(documented, m[1]) {
			t.Errorf("%s documents %s twice", reference, m[1])
		}
		documented = append(documented, m[1])
	}
	accepted := acceptedFields()
	if len(accepted) < 40 || len(documented) < 40 {
		t.Fatalf("the parser accepts %d fields and %s documents %d: the lists were not read", len(accepted), reference, len(documented))
	}
	for _, f := range accepted {
		if !slices.Contains(documented, f) {
			t.Errorf("the parser accepts %s, and %s has no row for it: add one (| `%s` | default | what |)", f, reference, f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(accepted, f) {
			t.Errorf("%s documents %s, which the parser does not accept: remove the row, or teach the parser the field", reference, f)
		}
	}
}

// TestReferenceFieldsParse puts each documented field in a spec of its
// own and parses it: whatever the parser thinks of the value, it must not
// call the field unknown. A field it does not know is refused (the
// control), so the check does not rest on acceptedFields alone.
func TestReferenceFieldsParse(t *testing.T) {
	page := readReference(t)
	fields := fieldRow.FindAllStringSubmatch(page, -1)
	for _, f := range append(fields, []string{"", "agents[].no_such_field"}) {
		path := f[1]
		doc := specSetting(path)
		_, err := Parse([]byte(doc))
		leaf := path[strings.LastIndex(path, ".")+1:]
		unknown := err != nil && strings.Contains(err.Error(), fmt.Sprintf("unknown field %q", leaf))
		if want := path == "agents[].no_such_field"; unknown != want {
			t.Errorf("%s: the parser calls it unknown: %v, want %v; the spec:\n%s\nits errors: %v", path, unknown, want, doc, err)
		}
	}
}

// specSetting is a spec that sets the field at path ("agents[].limits.cpu",
// "agents[].models.<provider>.concurrent") to 1.
func specSetting(path string) string {
	var v any = 1
	parts := strings.Split(path, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		key, list := strings.CutSuffix(parts[i], "[]")
		if key == "<provider>" {
			key = "anthropic"
		}
		if list {
			v = []any{v}
		}
		v = map[string]any{key: v}
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestReferenceExamplesParse(t *testing.T) {
	blocks := yamlBlock.FindAllStringSubmatch(readReference(t), -1)
	if len(blocks) < 2 {
		t.Fatalf("%s shows %d YAML blocks; it has at least the smallest spec and the whole one", reference, len(blocks))
	}
	for i, b := range blocks {
		if _, err := Parse([]byte(b[1])); err != nil {
			t.Errorf("%s: YAML block %d does not parse: %v\n%s", reference, i+1, err, b[1])
		}
	}
}
