package modelapi

import "github.com/flockrun/flock/wire"

// MaxTokens bounds a number of tokens, in a spec's limit and in a
// request's maximum alike.
const MaxTokens = 1 << 50

// Usage is what a provider reported of one request, in flock's terms (the
// tokens as the bus carries them), and the provider-side tools it ran.
type Usage struct {
	wire.Tokens
	ServerTools ToolUses
	Reported    bool // the answer carried a usage at all
	Estimated   bool // the answer ended before its usage: estimated (Meter.Estimate)
}

// UsageFormat is where a kind's answers report their usage, and how it
// is read.
type UsageFormat struct {
	// Paths are where a usage object sits in an answer's document.
	Paths []UsagePath
	// FinalKeys, if set, are keys (as paths, like Paths), one of which
	// must come before a usage in its document for the usage to end the
	// answer: where every event of a stream reports its usage so far
	// (Gemini's), only the one that finishes the answer is the last.
	FinalKeys [][]string
	// New makes the reader of one answer's usage objects.
	New func() UsageReader
}

// UsagePath is the keys of the objects that lead to a usage object, from
// the document's top; arrays on the way are passed through (a Gemini
// stream without SSE is an array of answers).
type UsagePath struct {
	Keys []string
	// Start: the usage the answer reports as it starts (Anthropic's
	// message_start), never its last.
	Start bool
}

// UsageReader reads one answer's usage objects, as its kind writes them.
type UsageReader interface {
	// Take reads one usage object (keeping each field as last reported:
	// the APIs report totals so far); it says whether it held a count.
	Take(obj []byte) bool
	// Usage is what was reported so far.
	Usage() (wire.Tokens, ToolUses)
}

// set keeps *v in *dst if the field was reported.
func set(dst *uint64, v *uint64) bool {
	if v == nil {
		return false
	}
	*dst = *v
	return true
}

// Meter reads one answer as it passes: a stream event by event, JSON
// whole, keeping the usage each reports and what the model wrote, for an
// estimate when no usage comes. It holds none of the answer.
type Meter struct {
	doc      docScanner
	sse      *sse // nil: the answer is one JSON document
	reader   UsageReader
	reported bool
	final    bool // a usage that ends the answer was read
}

// NewMeter is a meter of an answer of kind k.
func NewMeter(k *Kind) *Meter {
	return &Meter{doc: docScanner{format: &k.Usage}, reader: k.Usage.New()}
}

// Stream makes m read a stream of server-sent events.
func (m *Meter) Stream() { m.sse = &sse{doc: &m.doc} }

// Write reads the answer's next bytes.
func (m *Meter) Write(p []byte) {
	if m.sse != nil {
		m.sse.write(p)
	} else {
		m.doc.write(p)
	}
	m.drain()
}

// End reads the end of the answer: a last event with no empty line after
// it.
func (m *Meter) End() {
	if m.sse != nil {
		m.sse.endEvent()
	}
	m.drain()
}

// Final says whether a usage that ends the answer was read.
func (m *Meter) Final() bool { return m.final }

// drain keeps the usages the scanner found.
func (m *Meter) drain() {
	for _, f := range m.doc.usages {
		if m.reader.Take(f.obj) {
			m.reported = true
			if f.final {
				m.final = true
			}
		}
	}
	m.doc.usages = m.doc.usages[:0]
}

// Usage is what the answer reported so far.
func (m *Meter) Usage() Usage {
	t, reported := m.reader.Usage()
	// The server tools: the most that the usage reported (Anthropic's)
	// or the tool calls that passed counted.
	tools := m.doc.tools.most()
	for i, n := range reported {
		tools[i] = max(tools[i], n)
	}
	return Usage{Tokens: t, ServerTools: tools, Reported: m.reported}
}

// BytesPerToken is the estimate of text a token stands for when an
// answer ends before its usage: fewer than the four bytes of English or
// code, so that the estimate is at least what the client received.
const BytesPerToken = 3

// Estimate is u for an answer that ended without its final usage (a
// stream the client or the provider cut, or a provider that sent none):
// its output at least the text that passed (one token per BytesPerToken
// bytes, and one per event that carried text) up to the request's
// maximum (most; 0: none known), its input the request's estimate when
// the answer said nothing of it.
func (m *Meter) Estimate(u Usage, input, most uint64) Usage {
	text := uint64(m.doc.textBytes+BytesPerToken-1) / BytesPerToken
	if m.sse != nil {
		text = max(text, uint64(m.sse.events))
	}
	if most > 0 {
		text = min(text, most) // a provider writes no more than asked
	}
	u.OutputTokens = max(u.OutputTokens, text)
	if u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens == 0 {
		u.InputTokens = input
	}
	u.Estimated = true
	return u
}
