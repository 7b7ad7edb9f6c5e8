package main

// Tier: unit (no root).

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/cluster"
	"github.com/flockrun/flock/spec"
)

func TestClusterCertsPrintsWhatItMadeOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "authority")
	f := &spec.Flock{Hosts: []spec.Host{
		{Name: "a", Address: netip.MustParseAddr("10.77.0.11")},
		{Name: "b", Address: netip.MustParseAddr("10.77.0.12")},
	}}
	var out bytes.Buffer
	if err := clusterCerts(&out, f, "flock.yaml", dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range []string{cluster.SecretFile, cluster.CAKeyFile, cluster.CAFile, "hosts/a.key", "hosts/a.crt", "hosts/b.key", "hosts/b.crt"} {
		want = append(want, filepath.Join(dir, p))
	}
	if got := strings.Fields(out.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("first run printed:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
	out.Reset()
	if err := clusterCerts(&out, f, "flock.yaml", dir, time.Now()); err != nil || out.Len() != 0 {
		t.Errorf("second run: %v, printed %q; want nothing", err, out.String())
	}
}

func TestClusterCertsRefuses(t *testing.T) {
	single := filepath.Join(t.TempDir(), "flock.yaml")
	if err := os.WriteFile(single, []byte("agents: [{id: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a single-host spec", []string{"-f", single}, single + " lists 0 host(s): cluster certificates are for a flock on two or more hosts"},
		{"no spec", nil, "no spec: give -f FILE"},
		{"a missing spec", []string{"-f", single + ".absent"}, "flock.yaml.absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "authority")
			var out bytes.Buffer
			cmd := newRoot()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"cluster", "certs", "--dir", dir}, tc.args...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q", out.String())
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s was made (%v)", dir, err)
			}
		})
	}
}
