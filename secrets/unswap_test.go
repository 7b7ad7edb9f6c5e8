package secrets

// Unit tier.

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestUnswap(t *testing.T) {
	b := testBindings()
	for _, tc := range []struct{ name, in, want string }{
		{"nothing", "plain answer", "plain answer"},
		{"empty", "", ""},
		{"echoed", `{"token": "` + ghSecret + `"}`, `{"token": "` + ghPH + `"}`},
		{"twice and both", ghSecret + seSecret + "x" + ghSecret, ghPH + sePH + "x" + ghPH},
		{"a part of one", ghSecret[:10], ghSecret[:10]},
		{"at the end", "x" + seSecret, "x" + sePH},
	} {
		for _, read := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader,
		} {
			got, err := io.ReadAll(Unswap(read(strings.NewReader(tc.in)), b))
			if err != nil || string(got) != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
		}
	}
}

func TestUnswapHeader(t *testing.T) {
	h := http.Header{"Location": {"https://api.search.example/q?key=se%2Bcr%2Ft%3D9"}, "X-Echo": {"token " + ghSecret}, "X-Other": {"as it was"}}
	UnswapHeader(h, testBindings())
	want := http.Header{"Location": {"https://api.search.example/q?key=ab%2Bcd%2Fe%3D1"}, "X-Echo": {"token " + ghPH}, "X-Other": {"as it was"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("%v, want %v", h, want)
	}
}

// chunked reads r in the sizes given, over and over.
type chunked struct {
	r     io.Reader
	sizes []int
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	n := c.sizes[c.i%len(c.sizes)]
	c.i++
	return c.r.Read(p[:min(len(p), n)])
}

// FuzzUnswap: whatever the stream around them and however it is read, the
// secrets planted in it never pass, and everything else passes unchanged.
// Unit tier.
func FuzzUnswap(f *testing.F) {
	f.Add([]byte("some answer"), uint64(1), uint8(3))
	f.Add([]byte{}, uint64(7), uint8(0))
	f.Add(bytes.Repeat([]byte("ghp_"), 100), uint64(42), uint8(9))
	f.Fuzz(func(t *testing.T, filler []byte, seed uint64, plants uint8) {
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		b := testBindings()
		// Fillers that hold no secret and cannot join a placeholder into
		// one: no '+', '/' or '=' (all of the search secret's are at the
		// same places as its placeholder's), no '_' (the GitHub one's).
		filler = bytes.Map(func(r rune) rune {
			if strings.ContainsRune("+/=_", r) {
				return '.'
			}
			return r
		}, filler)
		var in, want bytes.Buffer
		rest := filler
		for range plants % 16 {
			cut := 0
			if len(rest) > 0 {
				cut = rng.IntN(len(rest) + 1)
			}
			in.Write(rest[:cut])
			want.Write(rest[:cut])
			rest = rest[cut:]
			x := b[rng.IntN(len(b))]
			in.Write(x.Secret)
			want.WriteString(x.Placeholder)
		}
		in.Write(rest)
		want.Write(rest)
		sizes := make([]int, 1+rng.IntN(8))
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(64)
		}
		got, err := io.ReadAll(Unswap(&chunked{r: bytes.NewReader(in.Bytes()), sizes: sizes}, b))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range b {
			if bytes.Contains(got, x.Secret) {
				t.Fatalf("secret %s passed: %q", x.Name, got)
			}
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("read in %v:\n got %q\nwant %q", sizes, got, want.Bytes())
		}
	})
}

// A stream's event reaches the reader as it comes: only an end that
// begins a secret waits for what follows it.
// Unit tier.
func TestUnswapHoldsBackOnlyWhatBeginsASecret(t *testing.T) {
	b := testBindings()
	for _, tc := range []struct{ name, chunk, first string }{
		{"an event", "data: {}\n\n", "data: {}\n\n"},
		{"a secret whole", "data: " + ghSecret + "\n\n", "data: " + ghPH + "\n\n"},
		{"the start of a secret", "data: " + ghSecret[:6], "data: "},
	} {
		pr, pw := io.Pipe()
		go pw.Write([]byte(tc.chunk)) // then nothing: the stream stays open
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 1024)
			n, _ := Unswap(pr, b).Read(buf)
			got <- string(buf[:n])
		}()
		select {
		case g := <-got:
			if g != tc.first {
				t.Errorf("%s: read %q first, want %q", tc.name, g, tc.first)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no read returned while the stream stayed open", tc.name)
		}
		pw.Close()
	}
}

// Secrets that overlap (one begins another, one ends where another
// begins), read in pieces and into buffers of every size, are replaced
// as a whole answer read at once would have them: at each position the
// earliest secret, the first of b on a tie.
// Unit tier.
func TestUnswapAsReadWhole(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
	}{
		{"one", []string{"abab"}},
		{"one begins another", []string{"ab", "abba"}},
		{"the longer first", []string{"abba", "ab"}},
		{"one ends another", []string{"bab", "aab"}},
		{"single bytes", []string{"a", "bb"}},
	} {
		var b Bindings
		for i, s := range tc.secrets {
			// Placeholders of letters the answer never holds: a
			// placeholder does not join what follows into a secret.
			b = append(b, Binding{Name: s, Secret: []byte(s), Placeholder: strings.Repeat(string(rune('w'+i)), len(s))})
		}
		rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
		for range 300 {
			in := make([]byte, rng.IntN(200))
			for i := range in {
				in[i] = "ab"[rng.IntN(2)]
			}
			want := readWhole(in, b)
			sizes := []int{1 + rng.IntN(16), 1 + rng.IntN(16)}
			into := 1 + rng.IntN(12)
			u := Unswap(&chunked{r: bytes.NewReader(in), sizes: sizes}, b)
			var got []byte
			buf := make([]byte, into)
			for {
				n, err := u.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if string(got) != want {
				t.Fatalf("%s: %q read in %v into %d:\n got %q\nwant %q", tc.name, in, sizes, into, got, want)
			}
		}
	}
}

// readWhole is in with b's secrets replaced, read at once: at each
// position the first secret of b that begins there, if any.
func readWhole(in []byte, b Bindings) string {
	var out strings.Builder
	for i := 0; i < len(in); {
		k := slices.IndexFunc(b, func(x Binding) bool { return bytes.HasPrefix(in[i:], x.Secret) })
		if k < 0 {
			out.WriteByte(in[i])
			i++
			continue
		}
		out.WriteString(b[k].Placeholder)
		i += len(b[k].Secret)
	}
	return out.String()
}
