package spec

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// walker reads a YAML node tree field by field, so every problem is
// reported with the path an operator sees in the file (agents[2].limits.memory)
// rather than a Go type name, and collects them all.
type walker struct {
	errs Errors
	// The spec's hosts, read before the agents that name them (hosts.go).
	hostNames                   []string
	hostsGiven, hostsIncomplete bool
	clustered                   bool
	// The spec's providers by name, read before the agents that are
	// granted them (providers.go); incomplete if one could not be read.
	providerKinds       map[string]ProviderKind
	providersIncomplete bool
	// The spec's secrets, read before the agents granted them (secrets.go).
	secretList        []Secret
	secretNames       map[string]bool
	secretsIncomplete bool
}

func (w *walker) fail(path, format string, args ...any) {
	w.errs = append(w.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// kindName says what a node is, in the words of the spec reference.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return strconv.Quote(n.Value)
	}
	return "an alias"
}

// fields returns a mapping's values by key, reporting keys not in known.
// known is also the order the fix lists them in.
func (w *walker) fields(n *yaml.Node, path string, known ...string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		w.fail(path, "is %s; write a mapping of %s", kindName(n), strings.Join(known, ", "))
		return nil, false
	}
	out := map[string]*yaml.Node{}
	line := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if !contains(known, k) {
			w.fail(path, "unknown field %q; known fields are %s", k, strings.Join(known, ", "))
			continue
		}
		if first, dup := line[k]; dup {
			// YAML says a later key wins; an operator meant one of them.
			w.fail(join(path, k), "given twice (lines %d and %d); keep one", first, n.Content[i].Line)
			continue
		}
		out[k], line[k] = v, n.Content[i].Line
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// str reads a scalar as text.
func (w *walker) str(n *yaml.Node, path, example string) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		w.fail(path, "is %s; write a value such as %s", kindName(n), example)
		return "", false
	}
	return n.Value, true
}

// boolean reads true or false; what says what true means.
func (w *walker) boolean(n *yaml.Node, path, what string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		w.fail(path, "%s is not true or false; write true (%s) or false", kindName(n), what)
		return false
	}
	return n.Value == "true"
}

// integer reads a whole number in [lo, hi]; what says what the number is.
func (w *walker) integer(n *yaml.Node, path, what string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		w.fail(path, "%s is not a whole number; write %s from %d to %d", kindName(n), what, lo, hi)
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil || v < lo || v > hi {
		w.fail(path, "%s is out of range; write %s from %d to %d", n.Value, what, lo, hi)
		return 0, false
	}
	return v, true
}

// strList reads a list of strings.
func (w *walker) strList(n *yaml.Node, path, example string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		w.fail(path, "is %s; write a list, e.g. %s", kindName(n), example)
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		if item.Kind != yaml.ScalarNode || isNull(item) {
			w.fail(index(path, i), "is %s; each item is a string, e.g. %s", kindName(item), example)
			ok = false
			continue
		}
		out = append(out, item.Value)
	}
	return out, ok
}
