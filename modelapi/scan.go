package modelapi

import "bytes"

// docScanner follows one JSON document of an answer byte by byte as it
// passes, holding nothing but a few short keys: it hands on the usage
// objects found where its kind's format puts them (the top level, and in
// the message or response: Anthropic's message_start, OpenAI's
// response.completed), however long the document around them, and
// counts the bytes of text the model wrote (the string values of the
// keys isTextKey names), which is what a stream cut before its usage is
// estimated from. It assumes the provider's JSON: an agent can steer
// what a model writes, but never unescaped quotes or braces, so no text
// of the model's can look like a usage.
type docScanner struct {
	format    *UsageFormat
	depth     int
	obj       [maxTracked + 1]bool   // the container at each depth is an object
	key       [maxTracked + 1][]byte // the last key read at each depth
	expectKey bool
	inString  bool
	escaped   bool
	isKey     bool
	strLen    int
	keyBuf    []byte

	capDepth int    // the depth a usage object being captured opened at (0: none)
	capture  []byte // its bytes so far
	capFinal bool   // the usage object being captured ends the answer
	sawFinal bool   // the document has held one of the format's FinalKeys

	// What the scanner found, for its meter.
	usages    []found
	textBytes int64
	sawText   bool
	tools     toolScan // the provider-side tools used (toolscan.go)
}

type found struct {
	obj   []byte
	final bool // not a usage the answer starts with, nor one so far
}

// maxTracked is how deep keys are followed: text sits at depth 7 at most
// (a Gemini stream's [i].candidates[j].content.parts[k].text), usage
// at 2.
const maxTracked = 8

// maxUsage bounds a usage object captured: the real ones are a few
// hundred bytes.
const maxUsage = 16 << 10

// maxKey bounds a key kept: the ones the scanner looks for are short.
const maxKey = 32

// write follows p, the next bytes of the document.
func (s *docScanner) write(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.inString {
			// The rest of a string: find its end quickly.
			j := i
			for j < len(p) {
				if s.escaped {
					s.escaped = false
					j++
					continue
				}
				k := quoteOrEscape(p[j:])
				if k < 0 {
					j = len(p)
					break
				}
				j += k
				if p[j] == '\\' {
					s.escaped = true
					j++
					continue
				}
				break
			}
			s.strLen += j - i
			if s.isKey && len(s.keyBuf) <= maxKey {
				s.keyBuf = append(s.keyBuf, p[i:min(j, len(p))]...)
			}
			if s.capDepth > 0 {
				s.keep(p[i:min(j+1, len(p))])
			}
			s.tools.str(s, p[i:min(j, len(p))], j < len(p))
			if j >= len(p) {
				return
			}
			s.endString()
			i = j
			continue
		}
		c := p[i]
		if s.capDepth > 0 {
			s.keep(p[i : i+1])
		}
		switch c {
		case '"':
			s.inString, s.strLen = true, 0
			s.isKey = s.expectKey
			s.keyBuf = s.keyBuf[:0]
		case '{', '[':
			if c == '{' && s.capDepth == 0 {
				if p, ok := s.usageHere(); ok {
					s.capDepth, s.capture = s.depth+1, append(s.capture[:0], '{')
					s.capFinal = !p.Start && (s.format.FinalKeys == nil || s.sawFinal)
				}
			}
			s.depth++
			if s.depth <= maxTracked {
				s.obj[s.depth] = c == '{'
				s.key[s.depth] = s.key[s.depth][:0]
			}
			s.expectKey = c == '{'
		case '}', ']':
			if s.capDepth > 0 && s.depth == s.capDepth {
				if len(s.capture) <= maxUsage {
					s.usages = append(s.usages, found{obj: append([]byte(nil), s.capture...), final: s.capFinal})
				}
				s.capDepth = 0
			}
			if s.depth > 0 {
				s.depth--
			}
			s.expectKey = false
		case ',':
			s.expectKey = s.depth > 0 && s.depth <= maxTracked && s.obj[s.depth]
		case ':':
			s.expectKey = false
		}
	}
}

// endString closes the string just read: a key is kept for its depth,
// a value of a text key is counted.
func (s *docScanner) endString() {
	s.inString = false
	if s.depth < 1 || s.depth > maxTracked {
		return
	}
	if s.isKey {
		if len(s.keyBuf) <= maxKey {
			s.key[s.depth] = append(s.key[s.depth][:0], s.keyBuf...)
		} else {
			s.key[s.depth] = s.key[s.depth][:0]
		}
		for _, f := range s.format.FinalKeys {
			if !s.sawFinal && string(s.key[s.depth]) == f[len(f)-1] && s.at(f) {
				s.sawFinal = true
			}
		}
		return
	}
	if s.obj[s.depth] && isTextKey(s.key[s.depth]) && s.strLen > 0 {
		s.textBytes += int64(s.strLen)
		s.sawText = true
	}
}

// usageHere says whether an object opening now is a usage where the
// format puts one, and which.
func (s *docScanner) usageHere() (UsagePath, bool) {
	for _, p := range s.format.Paths {
		if s.at(p.Keys) {
			return p, true
		}
	}
	return UsagePath{}, false
}

// at says whether the keys of the objects open now, from the top (arrays
// passed through), are keys.
func (s *docScanner) at(keys []string) bool {
	if s.depth > maxTracked {
		return false
	}
	n := 0
	for d := 1; d <= s.depth; d++ {
		if !s.obj[d] {
			continue
		}
		if n == len(keys) || string(s.key[d]) != keys[n] {
			return false
		}
		n++
	}
	return n == len(keys)
}

func (s *docScanner) keep(b []byte) {
	if len(s.capture) <= maxUsage {
		s.capture = append(s.capture, b...)
	}
}

// quoteOrEscape is the index of the first '"' or '\\' in p, or -1: a
// plain loop, faster than bytes.IndexAny for the short strings of a
// stream's events.
func quoteOrEscape(p []byte) int {
	for i, c := range p {
		if c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

func isTextKey(k []byte) bool {
	switch string(k) { // no allocation: the compiler compares in place
	case "text", "thinking", "partial_json", "content", "delta", "arguments", "refusal", "reasoning_content", "reasoning":
		return true
	}
	return false
}

// reset readies s for the next document (the next event of a stream),
// keeping its buffers and what it counted.
func (s *docScanner) reset() {
	s.depth, s.expectKey, s.inString, s.escaped, s.capDepth, s.sawFinal = 0, false, false, false, 0, false
}

// sse reads a server-sent event stream as it passes, feeding each
// event's data to the document scanner: the bytes themselves go on
// unchanged and unheld, whatever the length of a line.
type sse struct {
	doc      *docScanner
	prefix   []byte // a line's first bytes, until it is known to be data: or not
	kind     lineKind
	lineText bool // more than '\r' on the line so far
	events   int  // events that carried text
	inEvent  bool
}

type lineKind uint8

const (
	lineUnknown lineKind = iota
	lineData
	lineDataSpace // after "data:", where one space is dropped
	lineOther
)

var dataField = []byte("data:")

func (s *sse) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		s.lineBytes(seg)
		if i < 0 {
			return
		}
		s.endLine()
		p = p[i+1:]
	}
}

// lineBytes takes the next bytes of a line (no newline among them).
func (s *sse) lineBytes(b []byte) {
	for len(b) > 0 {
		switch s.kind {
		case lineUnknown:
			s.lineText = s.lineText || len(bytes.Trim(b, "\r")) > 0
			n := min(len(dataField)-len(s.prefix), len(b))
			s.prefix = append(s.prefix, b[:n]...)
			b = b[n:]
			switch {
			case !bytes.HasPrefix(dataField, s.prefix):
				s.kind = lineOther
			case len(s.prefix) == len(dataField):
				s.kind = lineDataSpace
			}
		case lineDataSpace:
			if b[0] == ' ' {
				b = b[1:]
			}
			s.kind = lineData
			s.inEvent = true
		case lineData:
			s.doc.write(b)
			return
		default:
			s.lineText = s.lineText || len(bytes.Trim(b, "\r")) > 0
			return
		}
	}
}

// endLine ends a line; an empty one ends the event, and its document.
func (s *sse) endLine() {
	empty := !s.lineText
	if s.kind == lineData {
		s.doc.write([]byte{'\n'}) // the lines of one event's data are joined by newlines
	}
	s.prefix, s.kind, s.lineText = s.prefix[:0], lineUnknown, false
	if empty {
		s.endEvent()
	}
}

// endEvent ends an event: the next data begins a document of its own.
func (s *sse) endEvent() {
	if !s.inEvent {
		return
	}
	if s.doc.sawText {
		s.events++
	}
	s.doc.sawText = false
	s.doc.reset()
	s.inEvent = false
}
