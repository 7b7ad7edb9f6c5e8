package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/markdown"
)

// A citation of the design names a section by its heading, in one form:
// design.md, then a comma and the heading in double quotes. Go comments
// write it after docs/, pages as a link's text.
var (
	cited = regexp.MustCompile(`design\.md, "([^"]+)"`)
	// goCite is where a Go file names the design at all; each must go on
	// into a section.
	goCite = regexp.MustCompile(`docs/design\.md(, ")?`)
	// pageLink is a page's link into a section of the design.
	pageLink = regexp.MustCompile(`\[([^\]]*)\]\(((?:\.\./)*(?:docs/)?design\.md)#([^)]*)\)`)
	// commentBreak joins a comment's lines, so a heading may wrap.
	commentBreak = regexp.MustCompile(`\n[ \t]*//[ \t]*`)
	codeSpan     = regexp.MustCompile("`[^`]*`")
	headingLine  = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// designHeadings are the headings of the design page, as written.
func designHeadings(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingLine.FindAllStringSubmatch(string(b), -1) {
		out[strings.TrimSpace(m[1])] = true
	}
	return out
}

// goFiles are the repository's Go files by their path from its root, with
// each comment's lines joined.
func goFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", p)
		out[rel] = commentBreak.ReplaceAllString(string(b), " ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Tier: unit. Every section of the design page that a Go file or a page
// cites (docs/design.md, "Test tiers" is the form) is a heading there, and
// every citation has that form: a Go file names a section wherever it
// names the design, and a page's link into a section says which one.
func TestDesignSectionsCited(t *testing.T) {
	headings := designHeadings(t)
	if len(headings) < 20 {
		t.Fatalf("design.md has %d headings: not the design", len(headings))
	}
	n := 0
	check := func(file, section string) {
		n++
		if !headings[section] {
			t.Errorf("%s cites design.md, %q: design.md has no such heading", file, section)
		}
	}
	for file, text := range goFiles(t) {
		for _, m := range goCite.FindAllStringSubmatch(text, -1) {
			if m[1] == "" {
				t.Errorf(`%s names the design without a section: docs/design.md, "Test tiers" is the form`, file)
			}
		}
		for _, m := range cited.FindAllStringSubmatch(text, -1) {
			check(file, m[1])
		}
	}
	for page, text := range pages(t) {
		text = codeSpan.ReplaceAllString(strings.ReplaceAll(text, "\n", " "), "")
		for _, m := range cited.FindAllStringSubmatch(text, -1) {
			check(page, m[1])
		}
		for _, m := range pageLink.FindAllStringSubmatch(text, -1) {
			c := cited.FindStringSubmatch(m[1])
			if c == nil || c[0] != m[1] {
				t.Errorf(`%s: the link [%s](%s#%s) into the design must say its section as [design.md, "Test tiers"] does`, page, m[1], m[2], m[3])
				continue
			}
			if markdown.Slug(c[1]) != m[3] {
				t.Errorf("%s: the link to design.md, %q goes to #%s, not #%s", page, c[1], m[3], markdown.Slug(c[1]))
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d citations of design.md found: the files were not read", n)
	}
}
