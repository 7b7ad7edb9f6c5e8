package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/flockrun/flock/spec"
)

// askedAgents are the agents args name (flockctl status ID...), each one
// of f's, in the order given; none: every agent. in names f for the
// error: "the provisioned flock" or the spec's file.
func askedAgents(f *spec.Flock, args []string, in string) ([]int, error) {
	var ids []int
	for _, arg := range args {
		id, err := strconv.Atoi(arg)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("agent %q: an id is a positive number, as in the spec (%s has agents %s)", arg, in, spec.IDRanges(f.IDs()))
		}
		if _, ok := f.Agent(id); !ok {
			return nil, fmt.Errorf("agent %d is not in %s: its agents are %s", id, in, spec.IDRanges(f.IDs()))
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
