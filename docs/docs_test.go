// Package docs holds the operator's and the contributor's pages. Its tests
// keep them true: every relative link and anchor of README.md and of the
// pages resolves, and every transcript a page shows is the output a
// system test saw (test/testdata/transcripts).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/internal/markdown"
	"github.com/flockrun/flock/spec"
)

// transcripts is where the system tests record what they saw
// (test/transcript).
const transcripts = "../test/testdata/transcripts"

// pages are the repository's top-level pages (README.md, SECURITY.md,
// CONTRIBUTING.md, CHANGELOG.md), each example's README and every page
// under docs/, by their path from the repository's root.
func pages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(path string) {
		b, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		out[path] = string(b)
	}
	for _, path := range []string{"README.md", "SECURITY.md", "CONTRIBUTING.md", "CHANGELOG.md"} {
		add(path)
	}
	examples, _ := filepath.Glob("../examples/*/README.md")
	for _, p := range examples {
		add(strings.TrimPrefix(filepath.ToSlash(p), "../"))
	}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			add(filepath.Join("docs", p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("%d pages found: %v", len(out), out)
	}
	return out
}

// Tier: unit. Every relative link of the pages names a file or
// directory of the repository, and its #anchor a heading of that page.
func TestLinksResolve(t *testing.T) {
	all := pages(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if anchors[page] == nil {
			text, ok := all[page]
			if !ok {
				b, err := os.ReadFile(filepath.Join("..", page))
				if err != nil {
					return nil
				}
				text = string(b)
			}
			anchors[page] = markdown.Anchors(text)
		}
		return anchors[page]
	}
	checked := 0
	for page, text := range all {
		for _, l := range markdown.Links(text) {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(l.Target, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(filepath.Join("..", target)); err != nil {
					t.Errorf("%s:%d: %s: no such file or directory in the repository", page, l.Line, l.Target)
					continue
				}
			}
			if frag != "" && !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", page, l.Line, l.Target, target, frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: the pages were not read", checked)
	}
}

// A transcript block on a page: the marker names the transcript, and the
// fenced block after it shows it.
var transcriptBlock = regexp.MustCompile("(?ms)^<!-- transcript: ([a-z0-9-]+) -->\n```\n(.*?)^```$")

// copyTranscripts writes each transcript file into the blocks that show
// it (go test ./docs -update), after a system test recorded it again.
func copyTranscripts(t *testing.T) {
	for page, text := range pages(t) {
		out := transcriptBlock.ReplaceAllStringFunc(text, func(block string) string {
			m := transcriptBlock.FindStringSubmatch(block)
			b, err := os.ReadFile(filepath.Join(transcripts, m[1]+".txt"))
			if err != nil {
				t.Errorf("%s shows transcript %s: %v", page, m[1], err)
				return block
			}
			return strings.Replace(block, "```\n"+m[2]+"```", "```\n"+string(b)+"```", 1)
		})
		if out != text {
			if err := os.WriteFile(filepath.Join("..", page), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Tier: unit. Each transcript a page shows is its file, byte for byte: the
// output a system test saw, with its volatile parts as placeholders. Every
// fenced block of docs/troubleshooting.md is one, and every transcript is
// shown somewhere.
func TestTranscriptsAreWhatTestsSaw(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(transcripts, "*.txt"))
	if len(files) == 0 {
		t.Fatalf("no transcripts in %s", transcripts)
	}
	shown := map[string]bool{}
	if golden.Update() {
		copyTranscripts(t)
	}
	for page, text := range pages(t) {
		for _, m := range transcriptBlock.FindAllStringSubmatch(text, -1) {
			name, block := m[1], m[2]
			shown[name] = true
			want, err := os.ReadFile(filepath.Join(transcripts, name+".txt"))
			if err != nil {
				t.Errorf("%s shows transcript %s: %v", page, name, err)
				continue
			}
			if block != string(want) {
				t.Errorf("%s: transcript %s is not what the test saw (go test ./docs -update copies %s/%s.txt into the block):\n%s",
					page, name, transcripts, name, golden.LineDiff(string(want), block))
			}
		}
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".txt"); !shown[name] {
			t.Errorf("transcript %s is shown on no page", name)
		}
	}
	page := pages(t)["docs/troubleshooting.md"]
	fenced := strings.Count(page, "\n```") // each block's opening and closing
	if n := len(transcriptBlock.FindAllString(page, -1)); n == 0 || fenced != 2*n {
		t.Errorf("docs/troubleshooting.md has %d fenced blocks and %d transcripts: every output it shows is a transcript (commands to type go in indented blocks)", fenced/2, n)
	}
}

// specBlock is a fenced YAML block that holds a spec (a line "agents:").
var specBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```$")

// Tier: unit. Every spec a page shows parses: README.md's first one is
// what a newcomer provisions. (spec's own test holds docs/spec.md to the
// parser field by field.)
func TestSpecsShownParse(t *testing.T) {
	n := 0
	for page, text := range pages(t) {
		for _, m := range specBlock.FindAllStringSubmatch(text, -1) {
			if !regexp.MustCompile(`(?m)^agents:`).MatchString(m[1]) {
				continue
			}
			n++
			if _, err := spec.Parse([]byte(m[1])); err != nil {
				t.Errorf("%s: a spec it shows does not parse: %v\n%s", page, err, m[1])
			}
		}
	}
	if n < 3 {
		t.Errorf("%d specs found on the pages, want README.md's, models.md's and spec.md's", n)
	}
}
