package secrets

import (
	"bytes"
	"errors"
)

// Value is the secret a secret's file holds: its one line, without the
// spaces and line break around it (the operator pastes a token and ends
// the file). provision draws the placeholder from it and flock-proxy
// swaps it in: both read the file through Value, so the placeholder has
// the length of what is sent. Empty, or more than one line, or a NUL (it
// goes in a header), is an error.
func Value(file []byte) ([]byte, error) {
	v := bytes.TrimSpace(file)
	switch {
	case len(v) == 0:
		return nil, errors.New("it is empty; write the secret in it, one line")
	case bytes.ContainsAny(v, "\r\n\x00"):
		return nil, errors.New("it holds more than one line (or a NUL); write the secret alone, one line")
	}
	return v, nil
}
