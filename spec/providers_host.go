package spec

import (
	"crypto/x509"
	"fmt"
	"io/fs"
	"syscall"
)

// FileCheck is what ProviderFileProblems reads of the host: a file's
// metadata and, for a CA file, its bytes (os.Stat and os.ReadFile).
type FileCheck struct {
	Stat     func(string) (fs.FileInfo, error)
	ReadFile func(string) ([]byte, error)
}

// ProviderFileProblems are the problems of the files of the providers
// granted to agents (a host's), as this host has them: a key file must be a non-empty regular file only root
// may read (systemd hands it to flock-proxy.service alone), a CA file
// must hold a PEM certificate. provision refuses the spec on any of
// them, before it changes anything. Pure but for c.
func (f *Flock) ProviderFileProblems(c FileCheck, agents []Agent) Errors {
	used := map[string]bool{}
	for _, a := range agents {
		for _, g := range a.Models {
			used[g.Provider] = true
		}
	}
	var errs Errors
	fail := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for i, p := range f.Providers {
		path := index("providers", i)
		if !used[p.Name] {
			continue // not this host's to hold
		}
		if p.KeyFile != "" {
			kp := join(path, "key_file")
			fi, err := c.Stat(p.KeyFile)
			switch {
			case err != nil:
				fail(kp, "%s: %v; write the provider's API key there, readable by root alone (install -m 600 -o root -g root /dev/stdin %s, then paste the key and press Ctrl-D)", p.KeyFile, unwrapPath(err), p.KeyFile)
			case !fi.Mode().IsRegular():
				fail(kp, "%s is not a regular file (%s); give the file that holds the key", p.KeyFile, fi.Mode().Type())
			case ownerOf(fi) != 0:
				fail(kp, "%s is owned by uid %d, who could read or replace the key; chown root:root %s", p.KeyFile, ownerOf(fi), p.KeyFile)
			case fi.Mode().Perm()&0o077 != 0:
				fail(kp, "%s is readable or writable by others (mode %04o), and any user of this host could copy the key; chmod 600 %s (systemd hands it to flock-proxy alone)", p.KeyFile, fi.Mode().Perm(), p.KeyFile)
			case fi.Size() == 0:
				fail(kp, "%s is empty; write the provider's API key in it", p.KeyFile)
			}
		}
		if p.CAFile != "" {
			cp := join(path, "ca_file")
			b, err := c.ReadFile(p.CAFile)
			if err != nil {
				fail(cp, "%s: %v; give the PEM file of the roots that sign %s's certificate", p.CAFile, unwrapPath(err), p.URL)
			} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
				fail(cp, "%s holds no PEM certificate; give the roots that sign %s's certificate (-----BEGIN CERTIFICATE-----)", p.CAFile, p.URL)
			}
		}
	}
	return errs
}

// unwrapPath is an os error without the path it repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func ownerOf(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0) // unknown: not root's
}
