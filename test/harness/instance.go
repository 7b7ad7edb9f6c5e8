package harness

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// instance is what a Machine and a VM share around their boots: a name, a
// directory of their own, progress lines, and a teardown that runs once.
type instance struct {
	name string
	dir  string
	dirs dirKind
	log  io.Writer // nil discards

	claimed bool // dir is ours to remove: never another's

	closeOnce sync.Once
	closeErr  error
}

// startOrTearDown runs start; on its error it tears down whatever part exists with
// closeFn (the owner's Close) and says so.
func (i *instance) startOrTearDown(start, closeFn func() error) error {
	err := start()
	if err == nil {
		return nil
	}
	if cerr := closeFn(); cerr != nil {
		err = fmt.Errorf("%w; teardown: %w", err, cerr)
	}
	return fmt.Errorf("harness: start %s %s: %w", i.dirs.what, i.name, err)
}

// claim makes the instance's directory (dirKind.claim).
func (i *instance) claim() error {
	if err := i.dirs.claim(i.dir, i.logf); err != nil {
		return err
	}
	i.claimed = true
	return nil
}

// close runs stop (which powers off whatever runs), then removes the
// directory if it is ours: every step, once.
func (i *instance) close(stop func() error) error {
	i.closeOnce.Do(func() {
		t0 := time.Now()
		errs := []error{stop()}
		if i.claimed {
			errs = append(errs, removeDir(i.dir))
		}
		if err := errors.Join(errs...); err != nil {
			i.closeErr = fmt.Errorf("harness: teardown of %s %s: %w", i.dirs.what, i.name, err)
		}
		i.logf("%s %s: torn down in %v", i.dirs.what, i.name, time.Since(t0).Round(time.Millisecond))
	})
	return i.closeErr
}

func (i *instance) logf(format string, args ...any) {
	if i.log != nil {
		fmt.Fprintf(i.log, format+"\n", args...)
	}
}
