package markdown

import (
	"maps"
	"slices"
	"testing"
)

// Tier: unit.
func TestAnchors(t *testing.T) {
	page := "# flock\n\n## Isolation levels, honestly\n### `flockctl audit`\n## A host does not answer\n## A host does not answer\n" +
		"```\n# not a heading\n```\n    # nor this\n#nor this\n## Metrics: 1/2 (and monitoring/)\n"
	want := []string{"flock", "isolation-levels-honestly", "flockctl-audit", "a-host-does-not-answer", "a-host-does-not-answer-1", "metrics-12-and-monitoring"}
	got := slices.Sorted(maps.Keys(Anchors(page)))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Anchors: %q, want %q", got, want)
	}
}

func TestLinks(t *testing.T) {
	page := "See [the spec](spec.md#the-bus) and [design](design.md).\n" +
		"`[not](a-link.md)` in code\n\n```\n[nor](this.md)\n```\n\n    [nor](indented.md)\n\n[x](https://example.com) [y](#local)\n"
	var got []Link
	got = Links(page)
	want := []Link{{1, "spec.md#the-bus"}, {1, "design.md"}, {10, "https://example.com"}, {10, "#local"}}
	if !slices.Equal(got, want) {
		t.Errorf("Links: %v, want %v", got, want)
	}
}
