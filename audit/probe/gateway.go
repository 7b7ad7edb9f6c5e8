package probe

// An agent attacking the model gateway it is granted: requests the
// gateway must refuse before it sends anything (a path with dot
// segments, a provider-side tool that reaches the network), a burst of
// the largest bodies its share allows, and a stream it closes before the
// usage at its end. OK means the attempt got through (a hole).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gatewayOp runs the model gateway's attacks; ok false: not one of them.
func gatewayOp(ctx context.Context, r Request) (string, error, bool) {
	switch r.Op {
	case "model-request":
		detail, err := modelRequest(ctx, r)
		return detail, err, true
	case "model-burst":
		detail, err := modelBurst(ctx, r)
		return detail, err, true
	case "model-cut":
		detail, err := modelCut(ctx, r)
		return detail, err, true
	}
	return "", nil, false
}

// modelClient is an HTTP client of the gateway as the process, or as uid
// (Key > 0: a control, from outside the unit).
func modelClient(uid int) *http.Client {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if uid > 0 {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) { return DialAs(ctx, uid, addr) }
	}
	return &http.Client{Transport: tr}
}

// modelRequest sends one request to the gateway: Addr is the provider's
// base URL, Path what follows it (as written: net/url keeps dot
// segments), Data the JSON body (none: a GET), Name an anthropic-beta
// header. OK: the gateway forwarded it (whatever the provider answered:
// a real provider may not know the audit's model); the error is the
// gateway's refusal, with its message.
func modelRequest(ctx context.Context, r Request) (string, error) {
	return retryBusy(ctx, func() (bool, string, error) {
		method, body := http.MethodGet, io.Reader(nil)
		if r.Data != "" {
			method, body = http.MethodPost, strings.NewReader(r.Data)
		}
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(r.Addr, "/")+r.Path, body)
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		if r.Name != "" {
			req.Header.Set("anthropic-beta", r.Name)
		}
		resp, err := modelClient(r.Key).Do(req)
		if err != nil {
			return false, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.Header.Get("X-Flock-Proxy") != "refused" {
			return false, "forwarded: the provider answered HTTP " + resp.Status, nil
		}
		return busy(resp.StatusCode, resp.Header), "", fmt.Errorf("refused by the gateway: HTTP %s: %s", resp.Status, clip(messageOf(b)))
	})
}

// answerOf is a gateway's answer as a probe's: 2xx OK with its status,
// anything else the error with the message of its body.
func answerOf(resp *http.Response, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 == 2 {
		return "HTTP " + resp.Status, nil
	}
	return "", fmt.Errorf("HTTP %s: %s", resp.Status, clip(messageOf(b)))
}

// messageOf is error.message of an API's error body, else the body.
func messageOf(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}

// busy says whether an answer is the gateway's 503: the bodies of all
// agents fill what it holds, for a moment (another agent's burst, the
// audit's included). The probes wait it out, as an SDK does.
func busy(status int, h http.Header) bool {
	return status == http.StatusServiceUnavailable && h.Get("X-Flock-Proxy") == "refused"
}

// retryBusy runs try until it is not refused as busy or ctx ends.
func retryBusy(ctx context.Context, try func() (bool, string, error)) (string, error) {
	for {
		wasBusy, detail, err := try()
		if !wasBusy {
			return detail, err
		}
		select {
		case <-ctx.Done():
			return detail, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// modelBurst sends Count bodies of Size bytes at once to Addr+Path, each
// on its own connection, all but their last byte first: the gateway holds
// what it has taken to read, so it must refuse the ones beyond what one
// agent may have it hold, at once. The ones it holds are then let go
// unfinished, and would be refused had they ended (a stream that is not
// a boolean), so nothing reaches the provider. OK (a hole): none was refused before its
// end; the error names how many were, and with what.
func modelBurst(ctx context.Context, r Request) (string, error) {
	for try := 1; ; try++ {
		detail, err := retryBusy(ctx, func() (bool, string, error) { return burstOnce(ctx, r) })
		if err == nil || try >= r.Tries {
			return detail, err
		}
		select {
		case <-ctx.Done():
			return detail, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// burstOnce is one burst; busy: a body was refused as the gateway's
// whole bound, not the agent's part (try again).
func burstOnce(ctx context.Context, r Request) (bool, string, error) {
	if r.Count <= 0 || r.Size < 64 {
		return false, "", errors.New("model-burst: Count and Size (at least 64) are needed")
	}
	u, err := url.Parse(strings.TrimSuffix(r.Addr, "/") + r.Path)
	if err != nil {
		return false, "", err
	}
	head := `{"stream":"flock-audit","pad":"`
	tail := `"}`
	type result struct {
		early  bool // answered before its body ended
		busy   bool
		status int
		msg    string
		err    error
	}
	results := make([]result, r.Count)
	conns := make([]net.Conn, r.Count)
	readers := make([]*bufio.Reader, r.Count)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	var d net.Dialer
	for i := range conns {
		var c net.Conn
		var err error
		if r.Key > 0 {
			c, err = DialAs(ctx, r.Key, u.Host)
		} else {
			c, err = d.DialContext(ctx, "tcp", u.Host)
		}
		if err != nil {
			return false, "", beyond(i, r.Count, "connection", err)
		}
		conns[i], readers[i] = c, bufio.NewReader(c)
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
	}
	// Every body but its last byte, all at once.
	pad := strings.Repeat("a", 64<<10)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, r.Size, head)
			left := r.Size - len(head) - len(tail)
			for left > 0 {
				n := min(left, len(pad))
				if _, err := io.WriteString(c, pad[:n]); err != nil {
					return // refused early: the gateway closed it
				}
				left -= n
			}
			io.WriteString(c, tail[:1])
		}()
	}
	wg.Wait()
	// Those refused already have their answer waiting.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		resp, err := http.ReadResponse(readers[i], nil)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			results[i] = result{early: true, status: resp.StatusCode, msg: messageOf(b), busy: busy(resp.StatusCode, resp.Header)}
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
	}
	refused, held, wasBusy := 0, 0, false
	var first string
	for i := range conns {
		wasBusy = wasBusy || results[i].busy
		if !results[i].early {
			held++ // the gateway took it and waits for its last byte
			continue
		}
		refused++
		if first == "" {
			first = fmt.Sprintf("%d %s", results[i].status, results[i].msg)
		}
	}
	// The held ones are let go unfinished (closed on return): the
	// gateway gives their bytes back and reads no more.
	detail := fmt.Sprintf("%d bodies of %d bytes at once: %d refused before their end, %d held", r.Count, r.Size, refused, held)
	if refused == 0 {
		return false, detail, nil
	}
	return wasBusy, "", fmt.Errorf("%s; the first refusal: %s", detail, clip(first))
}

// modelCut streams a request (Data, to Addr+Path) and closes the stream
// once Count words of its text have arrived, before the usage at its
// end: the detail says how many words it received, for the count flock
// keeps to be compared with. OK: it received them.
func modelCut(ctx context.Context, r Request) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(r.Addr, "/")+r.Path, strings.NewReader(r.Data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	for _, h := range r.Env { // the stand-in's shaping headers, NAME=value
		if k, v, ok := strings.Cut(h, "="); ok {
			req.Header.Set(k, v)
		}
	}
	resp, err := modelClient(r.Key).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerOf(resp, nil)
	}
	br := bufio.NewReader(resp.Body)
	events := 0
	for events < r.Count {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("the stream ended after %d text events: %w", events, err)
		}
		if strings.HasPrefix(line, "data:") && (strings.Contains(line, `"text_delta"`) || strings.Contains(line, `"content":"`)) {
			events++
		}
	}
	return "closed after " + strconv.Itoa(events) + " text events", nil
}
