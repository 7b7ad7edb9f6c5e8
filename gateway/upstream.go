package gateway

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Secret is what a provider's credentials hold: its key, and the PEM of
// the roots of a private upstream.
type Secret struct {
	Key string
	CA  []byte
}

// LoadSecrets reads each provider's credentials through read (name ->
// content): flock-proxy's, which are what systemd put in
// $CREDENTIALS_DIRECTORY at start or what root handed over since, so a
// rotated key reaches it at a reload as a secret does.
func LoadSecrets(read func(name string) ([]byte, error), p Policy) (map[string]Secret, error) {
	out := map[string]Secret{}
	for name, pr := range p.Providers {
		var s Secret
		if pr.KeyFile != "" {
			b, err := read(KeyCredential(name))
			if err != nil {
				return nil, fmt.Errorf("provider %s's key: %w (flock-proxy.service is handed %s as credential %s)", name, err, pr.KeyFile, KeyCredential(name))
			}
			s.Key = strings.TrimSpace(string(b))
			if s.Key == "" || strings.ContainsAny(s.Key, "\r\n") {
				return nil, fmt.Errorf("provider %s's key in %s is empty or more than one line", name, pr.KeyFile)
			}
		}
		if pr.CAFile != "" {
			b, err := read(CACredential(name))
			if err != nil {
				return nil, fmt.Errorf("provider %s's CA: %w (flock-proxy.service is handed %s as credential %s)", name, err, pr.CAFile, CACredential(name))
			}
			s.CA = b
		}
		out[name] = s
	}
	return out, nil
}

// upstream is one provider: where it is, how to reach it (its own
// transport: its roots, its connections kept alive across requests and
// agents), and its key.
type upstream struct {
	p     spec.Provider
	kind  *modelapi.Kind
	sec   Secret
	base  *url.URL
	tr    *http.Transport
	proxy *httputil.ReverseProxy
}

func (u *upstream) same(p spec.Provider, s Secret) bool {
	return reflect.DeepEqual(u.p, p) && u.sec.Key == s.Key && bytes.Equal(u.sec.CA, s.CA)
}

func newUpstream(g *Gateway, p spec.Provider, sec Secret) (*upstream, error) {
	base, err := url.Parse(p.URL)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(sec.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(sec.CA) {
			return nil, fmt.Errorf("provider %s: its CA file holds no PEM certificate", p.Name)
		}
		tc.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// No response header timeout: an answer that is not streamed
		// comes whole, after the model has written it (minutes).
	}
	kind, ok := modelapi.Lookup(string(p.Kind))
	if !ok {
		return nil, fmt.Errorf("provider %s: kind %q is not one this proxy knows (%s)", p.Name, p.Kind, modelapi.Choices())
	}
	u := &upstream{p: p, kind: kind, sec: sec, base: base, tr: tr}
	u.proxy = &httputil.ReverseProxy{
		Rewrite:        u.rewrite,
		Transport:      tr,
		ModifyResponse: u.modifyResponse,
		ErrorHandler:   u.errorHandler,
		// Streams are recognised (text/event-stream) and flushed per
		// write anyway; everything else is too, at once.
		FlushInterval: -1,
		ErrorLog:      log.New(logWriter{g}, "", 0),
		// One buffer per answer copied, from a pool: without one the
		// proxy allocates 32 KiB per request, most of the gateway's
		// garbage, and the collector's pauses were its slowest requests.
		BufferPool: copyBuffers,
	}
	return u, nil
}

// copyBuffers are the buffers answers are copied through.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// dropped are the client's headers never forwarded: whatever key or
// token it sent (the provider's key replaces them), the choice of an
// organization or project to bill, cookies, what a proxy adds, and the
// encodings it accepts (the gateway must read the usage, so the
// transport asks for gzip itself and decodes it).
var dropped = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie",
	"OpenAI-Organization", "OpenAI-Project", "Anthropic-Admin-Key",
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Via",
	"Accept-Encoding", "X-Http-Method-Override"}

// rewrite sends the request to the provider: its base URL and the rest
// of the path, the client's query, the provider's key.
func (u *upstream) rewrite(pr *httputil.ProxyRequest) {
	_, rest := splitProvider(pr.In.URL.Path)
	out := pr.Out
	out.URL.Scheme, out.URL.Host = u.base.Scheme, u.base.Host
	out.URL.Path = strings.TrimSuffix(u.base.Path, "/") + rest
	out.URL.RawPath = ""
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = u.base.Host
	for _, h := range dropped {
		out.Header.Del(h)
	}
	for _, h := range u.kind.Dropped {
		out.Header.Del(h)
	}
	if u.sec.Key != "" {
		u.kind.Auth(out.Header, u.sec.Key)
	}
}

type exchangeKey struct{}

// exchange is one forwarded request, metered: it is recorded once, when
// its answer ends (read to its end, cut, or never read).
type exchange struct {
	g        *Gateway
	agent    int
	provider string
	start    time.Time
	status   int
	kind     *modelapi.Kind
	meter    *modelapi.Meter
	metered  bool // the answer is read by the meter (a stream, or JSON)
	spends   bool // the endpoint's answers report a usage
	once     sync.Once
	// What the request holds while it is under way: what it reserved in
	// each of its scopes, its body's bytes (held); its model's price.
	scopes        []scopeID
	reserved      wire.Spend
	price         modelapi.Price
	priced        bool
	inputEstimate uint64
	maxOutput     uint64 // the most the request asked for (0: unknown)
	begun         uint64 // its begin line in the store (Store.Begin)
	task          uint64 // the task it is charged to (0: none)
	held          func()
	releaseOnce   sync.Once
}

// release gives back the bytes of the request's body, once.
func (x *exchange) release() {
	x.releaseOnce.Do(func() {
		if x.held != nil {
			x.held()
		}
	})
}

func exchangeOf(r *http.Request) *exchange {
	x, _ := r.Context().Value(exchangeKey{}).(*exchange)
	return x
}

// modifyResponse meters the answer as it passes: a stream event by
// event, JSON as it goes. The status and the body go on unchanged.
func (u *upstream) modifyResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request)
	if x == nil {
		return errNoExchange
	}
	x.status = resp.StatusCode
	ct := resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode >= 300:
	case strings.HasPrefix(ct, "text/event-stream"):
		x.meter.Stream()
		x.metered = true
	case strings.Contains(ct, "json"):
		x.metered = true
	}
	resp.Body = &meteredBody{r: resp.Body, x: x}
	return nil
}

// errorHandler answers a request the provider did not: the client gone
// before the answer began (499, counted), or the provider unreachable
// (502, in its own format). A body too large never gets here: the gateway
// read it whole before sending (judge).
func (u *upstream) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r)
	switch {
	case r.Context().Err() != nil:
		// The client went away before the answer began.
		x.status = 499
	default:
		line := fmt.Sprintf("flock proxy: agent %d: provider %s (%s) did not answer: %v", x.agent, x.provider, u.p.URL, unwrapURL(err))
		x.g.refuse(w, x.agent, x.provider, u.kind, ReasonUpstream, http.StatusBadGateway, line, 0)
		x.status = http.StatusBadGateway
	}
	x.finish(false)
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// meteredBody passes the answer's bytes on as they come, feeding the
// meter; its end (EOF, an error, or Close before either) records the
// exchange.
type meteredBody struct {
	r io.ReadCloser
	x *exchange
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	x := b.x
	if n > 0 && x.metered {
		x.meter.Write(p[:n])
	}
	switch {
	case err == io.EOF:
		x.meter.End()
		x.finish(false)
	case err != nil:
		x.finish(true)
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.x.finish(true) // a no-op after the end was recorded
	return b.r.Close()
}

// finish records the exchange once: its status, what the meter read, and
// whether the answer was cut short.
func (x *exchange) finish(cut bool) {
	x.once.Do(func() {
		status := x.status
		if status == 0 {
			status = 499
		}
		o := Outcome{At: x.g.now(), Usage: x.meter.Usage(), Status: status, Cut: cut && status < 300, Duration: x.g.now().Sub(x.start), Begun: x.begun, Task: x.task}
		if x.spends && status < 300 && !x.meter.Final() {
			// No usage ended the answer: count at least what it
			// passed, and say so.
			o.Usage = x.meter.Estimate(o.Usage, x.inputEstimate, x.maxOutput)
			o.NoUsage = !o.Cut
		}
		if x.priced {
			o.Cost = x.price.Cost(o.Usage.Tokens)
		}
		if err := x.g.Store.Record(x.agent, x.provider, o); err != nil {
			x.g.logf("gateway: counting a request of agent %d to %s: %v", x.agent, x.provider, err)
		}
		// Counted: what the request reserved is its usage now.
		x.g.limiter.settle(x.scopes, x.reserved)
		x.release()
	})
}
