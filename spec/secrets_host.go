package spec

// SecretFileProblems are the problems of the files of the secrets
// granted to agents (a host's), as this host has them: each must be a
// non-empty regular file only root may read, as a provider's key file
// (systemd hands it to flock-proxy.service alone). provision refuses the
// spec on any of them, before it changes anything. Pure but for c.
func (f *Flock) SecretFileProblems(c FileCheck, agents []Agent) Errors {
	used := map[string]bool{}
	for _, a := range agents {
		for _, name := range a.Secrets {
			used[name] = true
		}
	}
	var errs Errors
	for i, s := range f.Secrets {
		if !used[s.Name] {
			continue // not this host's to hold
		}
		if msg := rootOnlyProblem(c, s.File, "the secret", "the secret"); msg != "" {
			errs = append(errs, &FieldError{Path: join(index("secrets", i), "file"), Msg: msg})
		}
	}
	return errs
}
