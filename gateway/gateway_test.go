package gateway

// Tier: unit. The gateway on loopback in front of the stand-in upstream
// (TLS with its own CA, HTTP/2), agents told apart by their connections.

import (
	"bufio"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

const (
	uidA, uidB, uidNobody = 2000000001, 2000000002, 65534
	idA, idB              = 1, 2
)

func grants(a, b map[string]spec.Grant) map[uint32]Agent {
	return map[uint32]Agent{uidA: {ID: idA, Grants: a}, uidB: {ID: idB, Grants: b}}
}

func both() map[string]spec.Grant {
	return map[string]spec.Grant{"anth": {Provider: "anth"}, "oai": {Provider: "oai"}}
}

// The key reaches the upstream, the client's does not, and every answer
// (whole or streamed, each API) is counted as the upstream reported it.
func TestGatewayInjectsTheKeyAndMetersEveryAnswer(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	// The client's own credentials, a placeholder or a stolen key: the
	// stand-in refuses any request that still carries them.
	creds := []string{"X-Api-Key", "sk-placeholder", "Authorization", "Bearer sk-stolen", "X-Standin-Tag", "a"}
	for _, tc := range []struct{ path, body, want string }{
		{"/anth/v1/messages", anthropicReq, `"type":"message"`},
		{"/anth/v1/messages?beta=true", anthropicStreamReq, "event: message_stop"},
		{"/oai/chat/completions", openaiReq, `"object":"chat.completion"`},
		// No include_usage: the gateway asks for it, and the client gets
		// the usage chunk.
		{"/oai/chat/completions", openaiStreamReq, `"usage":{`},
		{"/anth/v1/messages/count_tokens", anthropicReq, `"input_tokens"`},
		{"/anth/v1/models", "", `"standin-1"`},
	} {
		method := http.MethodPost
		if tc.body == "" {
			method = http.MethodGet
		}
		status, _, body := r.call(uidA, method, tc.path, tc.body, creds...)
		if status != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 200 with %q", tc.path, status, body, tc.want)
		}
	}
	want := reported(r.up.Reported("a"))
	if want.Total() == 0 || want.CacheReadTokens == 0 || want.CacheWriteTokens == 0 {
		t.Errorf("the stand-in reported %+v: want every kind of token", want)
	}
	eventually(t, func() error {
		if got := sum(r.usageOf(idA, "anth"), r.usageOf(idA, "oai")); got != want {
			return fmt.Errorf("flock counted %+v, the upstream reported %+v", got, want)
		}
		if u := r.g.Store.Usage(idA)["anth"]; u.Requests != 4 || len(u.Errors) != 0 || u.DayRequests != 4 || u.MonthTokens != u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens {
			return fmt.Errorf("anth's counts: %+v", u)
		}
		return nil
	})
}

// A stream is passed on event by event: the upstream sends its second
// event only once the client has read the first through the gateway, so
// a gateway that held events back would never see the second.
func TestGatewayStreamsEventByEvent(t *testing.T) {
	read := make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(30 * time.Second):
			return // the test fails on its own deadline
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n")
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	defer up.Close()
	r := newRig(t, grants(both(), nil))
	pol := r.g.Policy()
	pr := pol.Providers["anth"]
	pr.URL = up.URL
	pol.Providers["anth"] = pr
	r.secrets["anth"] = Secret{Key: anthropicKey, CA: pemOf(up)}
	if err := r.g.SetPolicy(pol, r.secrets); err != nil {
		t.Fatal(err)
	}
	resp, err := r.client(uidA).Post("http://"+r.addr+"/anth/v1/messages", "application/json", strings.NewReader(anthropicStreamReq))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		var lines []string
		for len(lines) < 2 {
			l, err := br.ReadString('\n')
			if err != nil {
				break
			}
			lines = append(lines, l)
		}
		first <- strings.Join(lines, "")
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, "message_start") {
			t.Fatalf("first event: %q", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the first event did not reach the client while the upstream held the second: the gateway buffers")
	}
	close(read)
	rest, _ := readAll(br)
	if !strings.Contains(rest, "message_delta") {
		t.Errorf("the rest of the stream: %q", rest)
	}
	eventually(t, func() error {
		if u := r.usageOf(idA, "anth"); u.InputTokens != 7 || u.OutputTokens != 9 {
			return fmt.Errorf("counted %+v, want 7 in, 9 out", u)
		}
		return nil
	})
}

func readAll(br *bufio.Reader) (string, error) {
	var b strings.Builder
	_, err := br.WriteTo(&b)
	return b.String(), err
}

// Streams the upstream cuts at every point: what was counted is at least
// what the events that arrived reported, and at least the words the
// client received; a stream cut before its usage is counted as estimated,
// and every cut is counted as one.
func TestGatewayCountsCutStreams(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	cuts, early, words := 0, 0, 0
	for cut := 1; cut <= 12; cut++ {
		for _, tc := range []struct{ path, body string }{{"/anth/v1/messages", anthropicStreamReq}, {"/oai/chat/completions", openaiStreamReq}} {
			status, _, body := r.call(uidA, http.MethodPost, tc.path, tc.body, "X-Standin-Tag", "cut", "X-Standin-Cut", fmt.Sprint(cut), "X-Standin-Words", "6")
			if status != 200 {
				t.Fatalf("%s cut after %d: %d %s", tc.path, cut, status, body)
			}
			if strings.Contains(body, "read error") {
				cuts++
				if !strings.Contains(body, "message_delta") && !strings.Contains(body, `"completion_tokens"`) {
					early++ // cut before its usage
				}
			}
			words += strings.Count(body, "word")
		}
	}
	want := reported(r.up.Reported("cut"))
	eventually(t, func() error {
		got := sum(r.usageOf(idA, "anth"), r.usageOf(idA, "oai"))
		if got.InputTokens < want.InputTokens || got.OutputTokens < want.OutputTokens || got.CacheReadTokens < want.CacheReadTokens || got.CacheWriteTokens < want.CacheWriteTokens {
			return fmt.Errorf("flock counted %+v, less than the upstream reported %+v", got, want)
		}
		if got.OutputTokens < uint64(words) {
			return fmt.Errorf("flock counted %d output tokens, the client received %d words", got.OutputTokens, words)
		}
		if got.OutputTokens > 3*uint64(words)+want.OutputTokens {
			return fmt.Errorf("flock counted %d output tokens, more than 3 a word (%d words) and what was reported (%d)", got.OutputTokens, words, want.OutputTokens)
		}
		return nil
	})
	u := r.g.Store.Usage(idA)
	n := u["anth"].Errors[ErrorCut] + u["oai"].Errors[ErrorCut]
	if cuts == 0 || n != uint64(cuts) {
		t.Errorf("%d streams were cut, %d counted as cut", cuts, n)
	}
	if est := u["anth"].EstimatedRequests + u["oai"].EstimatedRequests; early == 0 || est != uint64(early) {
		t.Errorf("%d streams were cut before their usage, %d counted as estimated", early, est)
	}
}

func pemOf(s *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// Serves follows the policy in force: its agents, and no others, after a
// new policy too. Unit tier.
func TestServesFollowsThePolicy(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	if !r.g.Serves(idA) || !r.g.Serves(idB) || r.g.Serves(idA+idB+1) || r.g.Serves(0) {
		t.Fatalf("Serves(%d, %d, %d, 0) = %v %v %v %v; want true true false false",
			idA, idB, idA+idB+1, r.g.Serves(idA), r.g.Serves(idB), r.g.Serves(idA+idB+1), r.g.Serves(0))
	}
	pol := r.g.Policy()
	delete(pol.Agents, uidB)
	if err := r.g.SetPolicy(pol, r.secrets); err != nil {
		t.Fatal(err)
	}
	if !r.g.Serves(idA) || r.g.Serves(idB) {
		t.Errorf("after agent %d left the policy: Serves(%d) %v, Serves(%d) %v", idB, idA, r.g.Serves(idA), idB, r.g.Serves(idB))
	}
}
