package modelapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Body is a request's JSON body, checked as the gateway must before it
// decides anything from it: exactly one object, no key twice. It is read
// at its top level (and in the objects the gateway looks into) without
// being decoded into maps: a 32 MB body costs one pass and no copy.
type Body struct {
	raw     []byte
	members []member
	// misspelled is the first key a judge read that the body writes
	// otherwise than the API names it (Err).
	misspelled error
}

// member is one key of an object and where its value is in the body.
type member struct {
	key        string // as decoded, folded (foldKey)
	kstart     int    // where its key begins: raw[kstart:end] is the member as written
	start, end int    // the value is raw[start:end]
}

// BadBody is a body refused, with the line that says why (a 400).
type BadBody string

func (b BadBody) Error() string { return string(b) }

// ParseBody checks raw and reads its top level.
func ParseBody(raw []byte) (*Body, error) {
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v) // only for its words; the body is invalid, so this is cheap
		return nil, BadBody(fmt.Sprintf("the request body is not one JSON document: %v; send exactly one JSON object", err))
	}
	i := skipWS(raw, 0)
	if raw[i] != '{' {
		return nil, BadBody("the request body is JSON but not an object; send exactly one JSON object")
	}
	ms, err := objectMembers(raw, i, "")
	if err != nil {
		return nil, err
	}
	return &Body{raw: raw, members: ms}, nil
}

// get is the top level's member that the API names key.
func (b *Body) get(key string) (member, bool) {
	return b.lookup(b.members, key)
}

// lookup is the member of ms that the API names key (in lower case, as
// every API the judges read names its keys). It is found however the
// body writes it, as the most lenient server would read it; one written
// otherwise ("Max_Tokens") is refused when the judge ends (Err), as a
// server that reads keys exactly would ignore it, and the gateway would
// judge by what the provider does not read.
func (b *Body) lookup(ms []member, key string) (member, bool) {
	m, ok := lookup(ms, key)
	if ok && b.misspelled == nil {
		if w := b.keyOf(m); w != key {
			b.misspelled = BadBody(fmt.Sprintf("the key %s is written %s; write it %s, as the API names it", strconv.Quote(key), strconv.Quote(w), strconv.Quote(key)))
		}
	}
	return m, ok
}

func lookup(ms []member, key string) (member, bool) {
	for _, m := range ms {
		if m.key == key {
			return m, true
		}
	}
	return member{}, false
}

// Err is the first key a judge read that the body wrote otherwise than
// the API names it.
func (b *Body) Err() error { return b.misspelled }

// value is m's bytes.
func (b *Body) value(m member) []byte { return b.raw[m.start:m.end] }

// object reads the object that is m's value (nil if it is null; an error
// if it is neither), with the same checks as the top level.
func (b *Body) object(m member, name string) ([]member, error) {
	v := b.value(m)
	switch {
	case string(v) == "null":
		return nil, nil
	case v[0] != '{':
		return nil, BadBody(name + " is not an object")
	}
	return objectMembers(b.raw, m.start, name+".")
}

// elements are the values of the array that is m's value (an error if it
// is not an array; nil for null).
func (b *Body) elements(m member, name string) ([]member, error) {
	v := b.value(m)
	switch {
	case string(v) == "null":
		return nil, nil
	case v[0] != '[':
		return nil, BadBody(name + " is not an array")
	}
	var out []member
	i := skipWS(b.raw, m.start+1)
	for b.raw[i] != ']' {
		if b.raw[i] == ',' {
			i = skipWS(b.raw, i+1)
		}
		end := skipValue(b.raw, i)
		out = append(out, member{start: i, end: end})
		i = skipWS(b.raw, end)
	}
	return out, nil
}

// boolOf reads a boolean member: absent is false; anything but true or
// false is refused (a server that coerces "true" would stream unmetered).
func (b *Body) boolOf(key string) (bool, error) {
	m, ok := b.get(key)
	if !ok {
		return false, nil
	}
	switch string(b.value(m)) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, BadBody(fmt.Sprintf("%s is %s; it must be true or false", key, short(b.value(m))))
}

// countOf reads a whole number member (absent: 0, false), refusing any
// other value: the gateway reserves tokens from it.
func (b *Body) countOf(key string, most uint64) (uint64, bool, error) {
	m, ok := b.get(key)
	return b.count(m, ok, key, most)
}

// count reads member m (ok: it is there), named name, as countOf does.
func (b *Body) count(m member, ok bool, name string, most uint64) (uint64, bool, error) {
	if !ok || string(b.value(m)) == "null" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(string(b.value(m)), 10, 64)
	if err != nil || n > most {
		return 0, false, BadBody(fmt.Sprintf("%s is %s; it must be a whole number from 0 to %d", name, short(b.value(m)), most))
	}
	return n, true, nil
}

// keyOf is m's key as the body writes it (decoded, not folded).
func (b *Body) keyOf(m member) string { return decodeKey(b.raw[m.kstart:skipString(b.raw, m.kstart)]) }

// Edit sets a top-level key to a JSON value, replacing its value or
// adding it first.
type Edit struct {
	Key   string // as written in the body
	Value []byte
}

// With is the body with edits, as pieces of the original and the new
// values (no copy of the original), and its length.
func (b *Body) With(edits []Edit) ([][]byte, int) {
	type span struct {
		start, end int
		value      []byte
	}
	var replace []span
	var prepend []byte
	for _, e := range edits {
		if m, ok := lookup(b.members, foldKey(e.Key)); ok {
			replace = append(replace, span{m.start, m.end, e.Value})
			continue
		}
		k, _ := json.Marshal(e.Key)
		prepend = append(append(append(append(prepend, k...), ':'), e.Value...), ',')
	}
	var pieces [][]byte
	at := 0
	if len(prepend) > 0 {
		open := skipWS(b.raw, 0) + 1
		if len(b.members) == 0 {
			prepend = prepend[:len(prepend)-1] // no member follows: no comma
		}
		pieces = append(pieces, b.raw[:open], prepend)
		at = open
	}
	// Replacements in the body's order.
	for len(replace) > 0 {
		first := 0
		for i := range replace {
			if replace[i].start < replace[first].start {
				first = i
			}
		}
		s := replace[first]
		pieces = append(pieces, b.raw[at:s.start], s.value)
		at = s.end
		replace = append(replace[:first], replace[first+1:]...)
	}
	pieces = append(pieces, b.raw[at:])
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	return pieces, n
}

// objectMembers reads the members of the object at raw[i] (raw is valid
// JSON), refusing a key twice. Keys are compared as the most lenient
// server compares them (decoded, case folded, as Go's encoding/json
// does): what one reads as two keys another may read as one.
func objectMembers(raw []byte, i int, prefix string) ([]member, error) {
	var ms []member
	var seen map[string]bool
	i = skipWS(raw, i+1)
	for raw[i] != '}' {
		if raw[i] == ',' {
			i = skipWS(raw, i+1)
		}
		ks := i
		i = skipString(raw, i)
		key := foldKey(decodeKey(raw[ks:i]))
		i = skipWS(raw, i)
		i = skipWS(raw, i+1) // the colon
		vs := i
		i = skipValue(raw, i)
		if len(ms) >= 16 && seen == nil {
			seen = map[string]bool{}
			for _, m := range ms {
				seen[m.key] = true
			}
		}
		dup := false
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			_, dup = lookup(ms, key)
		}
		if dup {
			return nil, BadBody(fmt.Sprintf("the key %s%s is in the request body twice (or twice as its servers may read it: %s); send each key once", prefix, short(raw[ks:skipString(raw, ks)]), strconv.Quote(key)))
		}
		ms = append(ms, member{key: key, kstart: ks, start: vs, end: i})
		i = skipWS(raw, i)
	}
	return ms, nil
}

func decodeKey(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	json.Unmarshal(quoted, &s)
	return s
}

// foldKey is key with each letter replaced by the least of the letters
// it folds to (Unicode simple folding, as encoding/json and
// strings.EqualFold match keys): "Stream" and "ſtream" are "stream".
func foldKey(key string) string {
	simple := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			simple = false
			break
		}
	}
	if simple {
		return key
	}
	var sb strings.Builder
	for _, r := range key {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		if 'A' <= least && least <= 'Z' {
			least += 'a' - 'A'
		}
		sb.WriteRune(least)
	}
	return sb.String()
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	i++
	for {
		k := bytes.IndexAny(b[i:], `"\`)
		if k < 0 {
			return len(b)
		}
		i += k
		if b[i] == '"' {
			return i + 1
		}
		i += 2
	}
}

// skipValue is the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			k := bytes.IndexAny(b[i:], `"{}[]`)
			if k < 0 {
				return len(b)
			}
			i += k
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			default:
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
		i++
	}
	return i
}

// short is a value as the client wrote it, cut for an error line.
func short(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// PiecesReader reads pieces in order.
func PiecesReader(pieces [][]byte) io.Reader {
	rs := make([]io.Reader, len(pieces))
	for i, p := range pieces {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}
