package proxy

// Unit tier.

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// writes is a connection that keeps each write apart, or fails them.
type writes struct {
	net.Conn
	got [][]byte
	err error
}

func (w *writes) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.got = append(w.got, bytes.Clone(p))
	return len(p), nil
}

// asRecords is an answer's writer that writes to c a record at a time,
// as TLS does.
type asRecords struct {
	http.ResponseWriter
	c *countedConn
}

func (a asRecords) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += maxRecord {
		if _, err := a.c.Write(p[i:min(len(p), i+maxRecord)]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// A write of more than a record reaches the agent's connection in one
// system call, counted; a small one as it is; a failed one says so.
func TestRecordsAtOnce(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), answerBufSize/16)
	gone := errors.New("the agent went away")
	for _, tc := range []struct {
		name      string
		p         []byte
		err       error
		wantCalls int
	}{
		{"a buffer full", big, nil, 1},
		{"one record", big[:maxRecord], nil, 1},
		{"a few bytes", big[:10], nil, 1},
		{"the agent gone", big, gone, 0},
	} {
		conn := &writes{err: tc.err}
		c := &countedConn{Conn: conn}
		w := recordsAtOnce{asRecords{httptest.NewRecorder(), c}, c}
		n, err := w.Write(tc.p)
		if !errors.Is(err, tc.err) || tc.err == nil && n != len(tc.p) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, n, err, len(tc.p), tc.err)
		}
		if len(conn.got) != tc.wantCalls || tc.err == nil && (!bytes.Equal(conn.got[0], tc.p) || c.down.Load() != int64(len(tc.p))) {
			t.Errorf("%s: %d writes, %d bytes counted; want %d of the %d bytes", tc.name, len(conn.got), c.down.Load(), tc.wantCalls, len(tc.p))
		}
		// What follows goes out at once, not held.
		c.Write([]byte("after"))
		if last := conn.got; tc.err == nil && !bytes.Equal(last[len(last)-1], []byte("after")) {
			t.Errorf("%s: a write after it was held", tc.name)
		}
	}
}
