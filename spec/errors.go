package spec

import (
	"errors"
	"strings"
)

// Errors is every problem found in one spec, in document order. A spec is
// checked whole, so the operator fixes everything in one pass.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ErrInvalid is what every spec problem matches with errors.Is.
var ErrInvalid = errors.New("invalid spec")

// Is makes a FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// inFile prefixes each problem with the file it is in, the way compilers do.
type inFile struct {
	path string
	errs Errors
}

func (e *inFile) Error() string {
	lines := make([]string, len(e.errs))
	for i, fe := range e.errs {
		lines[i] = e.path + ": " + fe.Error()
	}
	return strings.Join(lines, "\n")
}

func (e *inFile) Unwrap() error { return e.errs }
