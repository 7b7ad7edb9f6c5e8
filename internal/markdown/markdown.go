// Package markdown reads what the project's tests check of its Markdown
// pages: the anchors their headings make and the links they hold.
package markdown

import (
	"regexp"
	"strconv"
	"strings"
)

// Anchors are the anchors of a page's headings as GitHub makes them: lower
// case, every character but letters, digits, spaces, "_" and "-" dropped,
// spaces made "-", and "-1", "-2"... after a repeated one. Lines in fenced
// code blocks are no headings.
func Anchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(page) {
		if !heading.MatchString(l.text) {
			continue
		}
		a := Slug(strings.TrimSpace(strings.TrimLeft(l.text, "#")))
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var (
	heading = regexp.MustCompile(`^#{1,6} `)
	drop    = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// Slug is the anchor GitHub makes of a heading's text.
func Slug(h string) string {
	return strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
}

// A Link is the target of an inline link, [text](target), and the line it
// is on (1-based).
type Link struct {
	Line   int
	Target string
}

var (
	link     = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// Links are the page's inline links outside code: fenced blocks, indented
// blocks and code spans hold examples, not links.
func Links(page string) []Link {
	var out []Link
	for _, l := range prose(page) {
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(l.text, ""), -1) {
			out = append(out, Link{Line: l.n, Target: m[1]})
		}
	}
	return out
}

type line struct {
	n    int
	text string
}

// prose are the lines of page outside fenced and indented code blocks.
func prose(page string) []line {
	var out []line
	fenced, prevBlank := false, true
	indented := false
	for i, l := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
			continue
		case fenced:
			continue
		case strings.HasPrefix(l, "    ") && (prevBlank || indented):
			indented = true
			continue
		}
		blank := strings.TrimSpace(l) == ""
		if !blank {
			indented = false
		}
		prevBlank = blank
		out = append(out, line{i + 1, l})
	}
	return out
}
