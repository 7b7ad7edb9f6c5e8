package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// clientHello is the first flight of a real TLS client asking for sni.
func clientHello(t testing.TB, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: sni == ""})
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Handshake()
		a.Close()
	}()
	b.SetDeadline(time.Now().Add(2 * time.Second))
	hdr := make([]byte, 5)
	if _, err := readFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := readFull(b, body); err != nil {
		t.Fatal(err)
	}
	b.Close()
	return append(hdr, body...)
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestReadSNI(t *testing.T) {
	hello := clientHello(t, "api.example.com")
	sni, read, err := readSNI(bytes.NewReader(append(append([]byte{}, hello...), "after"...)))
	if err != nil || sni != "api.example.com" {
		t.Fatalf("readSNI = %q, %v", sni, err)
	}
	// What was read is forwarded as it came, the hello at its head.
	if !bytes.HasPrefix(read, hello) {
		t.Errorf("read %d bytes, not the hello's %d at its head", len(read), len(hello))
	}
	// No SNI at all: an empty name, which matches no CONNECT name.
	if sni, _, err := readSNI(bytes.NewReader(clientHello(t, ""))); err != nil || sni != "" {
		t.Errorf("hello without SNI: %q, %v", sni, err)
	}
	// The same hello cut into two records is still read.
	split := splitRecord(hello, 40)
	if sni, _, err := readSNI(bytes.NewReader(split)); err != nil || sni != "api.example.com" {
		t.Errorf("hello in two records: %q, %v", sni, err)
	}
}

// splitRecord re-frames one handshake record's payload as two records.
func splitRecord(rec []byte, at int) []byte {
	body := rec[5:]
	frame := func(p []byte) []byte {
		h := []byte{rec[0], rec[1], rec[2], 0, 0}
		binary.BigEndian.PutUint16(h[3:], uint16(len(p)))
		return append(h, p...)
	}
	return append(frame(body[:at]), frame(body[at:])...)
}

// Truncated and hostile first flights are refused, never a panic or a hang.
func TestReadSNIRefusesHostileInput(t *testing.T) {
	hello := clientHello(t, "api.example.com")
	for n := 0; n < len(hello); n++ {
		if sni, _, err := readSNI(bytes.NewReader(hello[:n])); err == nil {
			t.Fatalf("hello cut at %d of %d read as %q", n, len(hello), sni)
		}
	}
	huge := []byte{22, 3, 1, 0xff, 0xff}
	hostile := map[string][]byte{
		"empty":                     nil,
		"http":                      []byte("GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n"),
		"alert record":              {21, 3, 3, 0, 2, 2, 40},
		"application data":          append([]byte{23, 3, 3, 0, 5}, "hello"...),
		"record longer than TLS":    append(huge, make([]byte, 1<<16)...),
		"handshake length too long": {22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff},
		"server hello":              {22, 3, 1, 0, 4, 2, 0, 0, 0},
		"sslv2 hello":               {0x80, 0x2e, 1, 3, 1, 0, 0x15, 0, 0, 0, 0x10},
		"zero records forever":      bytes.Repeat([]byte{22, 3, 1, 0, 0}, 20000),
		"garbage":                   bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 100),
		"bad sni":                   bytes.Replace(hello, []byte("api.example.com"), []byte("api.exa\x00ple.com"), 1),
	}
	for name, in := range hostile {
		done := make(chan error, 1)
		go func() {
			_, _, err := readSNI(bytes.NewReader(in))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: accepted", name)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: still reading after 5s", name)
		}
	}
	// A flood of handshake bytes stops at maxHello.
	flood := append([]byte{22, 3, 1, 0x40, 0}, bytes.Repeat([]byte{1}, 1<<20)...)
	_, read, err := readSNI(bytes.NewReader(flood))
	if err == nil || len(read) > maxHello {
		t.Errorf("flood: read %d bytes, %v", len(read), err)
	}
}

func FuzzReadSNI(f *testing.F) {
	f.Add(clientHello(f, "api.example.com"))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		sni, read, err := readSNI(bytes.NewReader(b))
		if err == nil && strings.ContainsAny(sni, "\x00\r\n") {
			t.Errorf("sni %q", sni)
		}
		if len(read) > len(b) {
			t.Errorf("read %d of %d bytes", len(read), len(b))
		}
	})
}
