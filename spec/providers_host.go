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
			if msg := rootOnlyProblem(c, p.KeyFile, "the provider's API key", "the key"); msg != "" {
				fail(join(path, "key_file"), "%s", msg)
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

// rootOnlyProblem says what is wrong with file as the home of a
// credential ("" nothing): it must be a non-empty regular file of root's
// that no one else may read or write. what names the credential in a fix
// ("the provider's API key"), it in a reason ("the key").
func rootOnlyProblem(c FileCheck, file, what, it string) string {
	fi, err := c.Stat(file)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: %v; write %s there, readable by root alone (install -m 600 -o root -g root /dev/stdin %s, then paste it and press Ctrl-D)", file, unwrapPath(err), what, file)
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("%s is not a regular file (%s); give the file that holds %s", file, fi.Mode().Type(), it)
	case ownerOf(fi) != 0:
		return fmt.Sprintf("%s is owned by uid %d, who could read or replace %s; chown root:root %s", file, ownerOf(fi), it, file)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Sprintf("%s is readable or writable by others (mode %04o), and any user of this host could copy %s; chmod 600 %s (systemd hands it to flock-proxy alone)", file, fi.Mode().Perm(), it, file)
	case fi.Size() == 0:
		return fmt.Sprintf("%s is empty; write %s in it", file, what)
	}
	return ""
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
