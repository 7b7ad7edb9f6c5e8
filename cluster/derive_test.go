package cluster

// Tier: unit.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// fixedSecret is bytes 0..31: the golden values below are what every host
// computes from it, and must never change (an agent's key would).
func fixedSecret() []byte {
	s := make([]byte, SecretSize)
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

func TestDerivationsAreStable(t *testing.T) {
	s := fixedSecret()
	if got, want := RoutePassword(s), "43b7775331445a192ff9ef43d11b1a499d7b8cf858d6091d7a1f269e341e2158"; got != want {
		t.Errorf("RoutePassword = %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, public string }{
		{"flock-1", "UBTP3XZKBIM6ZXYQ2DSDMOON7JCVB7IFFM5ENIC7ERRDDAGYHROTDJTQ"},
		{"flock-2", "UCJTNDJXMGAFUZ5GX2CC33F2DN4SRCICG3TBLZFIH6MQFGDJNRXNN7DY"},
	} {
		seed, err := AgentSeed(s, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			t.Fatalf("%s: the seed is no nkey seed: %v", tc.name, err)
		}
		pub, _ := kp.PublicKey()
		if pub != tc.public {
			t.Errorf("%s: public key %q, want %q", tc.name, pub, tc.public)
		}
		if !strings.HasPrefix(string(seed), "SU") || !nkeys.IsValidPublicUserKey(pub) {
			t.Errorf("%s: seed %.2s…, public %q: not a user key", tc.name, seed, pub)
		}
	}
}

func TestDerivationsDifferPerNameAndSecret(t *testing.T) {
	s1, s2 := fixedSecret(), fixedSecret()
	s2[0] ^= 1
	seen := map[string]string{}
	note := func(what, v string) {
		if prev, dup := seen[v]; dup {
			t.Errorf("%s and %s derive the same value", prev, what)
		}
		seen[v] = what
	}
	for i, s := range [][]byte{s1, s2} {
		note("route password of secret "+string(rune('1'+i)), RoutePassword(s))
		for _, name := range []string{"flock-1", "flock-2", "flock-10"} {
			seed, err := AgentSeed(s, name)
			if err != nil {
				t.Fatal(err)
			}
			note(name+" of secret "+string(rune('1'+i)), string(seed))
			again, _ := AgentSeed(s, name)
			if string(again) != string(seed) {
				t.Errorf("%s: two derivations differ", name)
			}
		}
	}
	if _, err := AgentSeed(s1[:16], "flock-1"); err == nil {
		t.Errorf("AgentSeed of a 16-byte secret: no error")
	}
	if _, err := AgentSeed(s1, ""); err == nil {
		t.Errorf("AgentSeed without a name: no error")
	}
}

func TestLoadSecret(t *testing.T) {
	good := strings.Repeat("0a", SecretSize)
	for _, tc := range []struct {
		name, content string // "" with none: no file
		want          string // error substring; "" for success
	}{
		{"good, with a newline", good + "\n", ""},
		{"good, upper case and spaces", "  " + strings.ToUpper(good) + " \n", ""},
		{"missing", "", "is missing; make it with `flockctl cluster certs"},
		{"not hex", strings.Repeat("zz", SecretSize), "is not hex (want 64 hex digits)"},
		{"too short", "0a0b", "has 2 bytes, want 32 (64 hex digits)"},
		{"too long", good + "00", "has 33 bytes, want 32"},
		{"empty", "\n", "has 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, SecretFile), []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := LoadSecret(dir)
			switch {
			case tc.want == "" && (err != nil || len(s) != SecretSize || s[0] != 0x0a):
				t.Errorf("LoadSecret = %x, %v", s, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("LoadSecret error %v, want one saying %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), filepath.Join(dir, SecretFile)):
				t.Errorf("the error does not name the file: %v", err)
			}
		})
	}
}
