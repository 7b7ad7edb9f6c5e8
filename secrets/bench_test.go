package secrets

// Tier: unit (benchmarks; make bench does not run them yet).

import (
	"bytes"
	"io"
	"net/http/httptest"
	"testing"
)

func BenchmarkSwap(b *testing.B) {
	bs := testBindings()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/repos/acme/x?per_page=100", nil)
		req.Header.Set("Authorization", "Bearer "+ghPH)
		req.Header.Set("Accept", "application/vnd.github+json")
		if _, err := Swap(req, bs, "api.github.com:443"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnswap reads a 1 MiB answer holding one secret.
func BenchmarkUnswap(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	copy(body[1<<19:], ghSecret)
	bs := testBindings()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := io.Copy(io.Discard, Unswap(bytes.NewReader(body), bs)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafCached(b *testing.B) {
	ca, err := NewCA()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ca.Leaf("api.github.com"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ca.Leaf("api.github.com"); err != nil {
			b.Fatal(err)
		}
	}
}
