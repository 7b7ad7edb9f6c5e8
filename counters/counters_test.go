package counters

// Tier: unit (no root). The reader's answer and the bus's reading of it
// are the same code; Client over a real Unix socket in a temporary
// directory, against Serve.

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/netpolicy"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      map[uint32]netpolicy.Refusals
		err     error
		want    map[uint32]netpolicy.Refusals
		wantErr string
	}{
		{name: "counters", in: map[uint32]netpolicy.Refusals{2000000001: {Refused: 1000, Logged: 6}, 4294901760: {Refused: 1}},
			want: map[uint32]netpolicy.Refusals{2000000001: {Refused: 1000, Logged: 6}, 4294901760: {Refused: 1}}},
		{name: "no table", in: nil, want: map[uint32]netpolicy.Refusals{}},
		{name: "the reader failed", err: errors.New("nftables: permission denied"), wantErr: "the counters reader: nftables: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(Encode(tc.in, tc.err))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Decode = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got == nil || !maps.Equal(got, tc.want) {
				t.Fatalf("Decode = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, in := range []string{``, `{`, `{}`, `{"refused":{"x":{}}}`, `[1]`} {
		if got, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) = %v, want an error", in, got)
		}
	}
}

// fakeReader is a firewall whose counters are given.
type fakeReader struct {
	r     map[uint32]netpolicy.Refusals
	err   error
	asked int
}

func (f *fakeReader) Refused(context.Context) (map[uint32]netpolicy.Refusals, error) {
	f.asked++
	return f.r, f.err
}

func TestServeAsksOnlyForAllowedPeers(t *testing.T) {
	fw := &fakeReader{r: map[uint32]netpolicy.Refusals{2000000001: {Refused: 3, Logged: 3}}}
	busUID := func(uid uint32) bool { return uid == 0 || uid == 990 }
	for _, tc := range []struct {
		peer    uint32
		asked   int
		wantErr string
	}{
		{peer: 990, asked: 1},
		{peer: 0, asked: 1},
		{peer: 2000000001, asked: 0, wantErr: "uid 2000000001 may not read"},
	} {
		fw.asked = 0
		var b bytes.Buffer
		err := Serve(context.Background(), &b, tc.peer, busUID, fw)
		got, derr := Decode(b.Bytes())
		switch {
		case fw.asked != tc.asked:
			t.Errorf("peer %d: the firewall was read %d times, want %d", tc.peer, fw.asked, tc.asked)
		case tc.wantErr == "" && (err != nil || derr != nil || got[2000000001].Refused != 3):
			t.Errorf("peer %d: Serve %v, answer %v %v", tc.peer, err, got, derr)
		case tc.wantErr != "" && (err == nil || derr == nil || !strings.Contains(derr.Error(), tc.wantErr)):
			t.Errorf("peer %d: Serve %v, answer %v %v; want refused (%q)", tc.peer, err, got, derr, tc.wantErr)
		}
	}
}

// listen serves each connection of a socket in a temporary directory
// with serve, as systemd's Accept=yes starts a reader per connection.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "counters.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return path
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	fw := &fakeReader{r: map[uint32]netpolicy.Refusals{2000000002: {Refused: 7, Logged: 5}}}
	path := listen(t, func(c net.Conn) { _ = Serve(ctx, c, 0, func(uint32) bool { return true }, fw) })
	got, err := Client{Path: path}.Refused(ctx)
	if err != nil || !maps.Equal(got, fw.r) {
		t.Errorf("Refused = %v, %v; want %v", got, err, fw.r)
	}

	fw.err = errors.New("no nf_tables")
	if _, err := (Client{Path: path}).Refused(ctx); err == nil || !strings.Contains(err.Error(), "no nf_tables") {
		t.Errorf("a reader that failed: %v, want its error", err)
	}

	if _, err := (Client{Path: filepath.Join(t.TempDir(), "none.sock")}).Refused(ctx); err == nil || !strings.Contains(err.Error(), "flockctl provision installs it") {
		t.Errorf("no socket: %v, want an error that names the fix", err)
	}

	// A reader that never answers (it holds the connection until the
	// test ends) costs the scrape its timeout: without one, this hangs.
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	hung := listen(t, func(c net.Conn) { <-never })
	if _, err := (Client{Path: hung, Timeout: 100 * time.Millisecond}).Refused(ctx); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a reader that never answers: %v, want its deadline", err)
	}

	huge := listen(t, func(c net.Conn) { _, _ = c.Write(bytes.Repeat([]byte(" "), maxAnswer+10)) })
	if _, err := (Client{Path: huge}).Refused(ctx); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("an answer over the bound: %v", err)
	}
}
