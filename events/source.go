package events

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Source is where events come from: the journal, the firewall's counters
// (or a fake in tests).
type Source interface {
	// History is what happened since, oldest first.
	History(ctx context.Context, since time.Time) ([]Event, error)
	// Follow sends what happens after History's last event until ctx
	// ends, and returns nil then.
	Follow(ctx context.Context, out chan<- Event) error
}

// Options are what flockctl events asks for.
type Options struct {
	Since  time.Time
	Agent  int // 0: every agent and the flock
	Follow bool
}

// Stream writes the events of sources since o.Since, oldest first, to
// emit; with o.Follow it then writes each new event as it comes, until ctx
// ends or a source fails.
func Stream(ctx context.Context, sources []Source, o Options, emit func(Event) error) error {
	var all []Event
	for _, s := range sources {
		evs, err := s.History(ctx, o.Since)
		if err != nil {
			return err
		}
		all = append(all, evs...)
	}
	slices.SortStableFunc(all, func(a, b Event) int { return a.Time.Compare(b.Time) })
	for _, e := range all {
		if !e.Time.Before(o.Since) && o.wants(e) {
			if err := emit(e); err != nil {
				return err
			}
		}
	}
	if !o.Follow {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan Event)
	errs := make(chan error, len(sources))
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Follow(ctx, out); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case e := <-out:
			if o.wants(e) {
				if err := emit(e); err != nil {
					return err
				}
			}
		}
	}
}

func (o Options) wants(e Event) bool { return o.Agent == 0 || e.Agent == o.Agent }

// Fake is a Source of given events, for tests: History gives those before
// the call, Follow the ones sent on Live.
type Fake struct {
	Past []Event
	Live chan Event
	Err  error // History's answer, if set
}

// History is f.Past since since.
func (f *Fake) History(_ context.Context, since time.Time) ([]Event, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	var out []Event
	for _, e := range f.Past {
		if !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Follow passes on what comes on f.Live until it closes or ctx ends.
func (f *Fake) Follow(ctx context.Context, out chan<- Event) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-f.Live:
			if !ok {
				<-ctx.Done()
				return nil
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
