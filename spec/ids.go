package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxRanges bounds IDRanges, so a message about a flock with many holes
// stays one line.
const maxRanges = 8

// IDRanges names agent ids in a short range form, "1-4, 7, 9-12", for a
// message about many agents; past maxRanges ranges it counts the rest.
func IDRanges(ids []int) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		part := strconv.Itoa(ids[i])
		if j > i {
			part += "-" + strconv.Itoa(ids[j])
		}
		parts = append(parts, part)
		i = j + 1
	}
	if len(parts) > maxRanges {
		return fmt.Sprintf("%s and %d more ranges", strings.Join(parts[:maxRanges], ", "), len(parts)-maxRanges)
	}
	return strings.Join(parts, ", ")
}

// IDs are the ids of f's agents, in the spec's order.
func (f *Flock) IDs() []int {
	ids := make([]int, len(f.Agents))
	for i, a := range f.Agents {
		ids[i] = a.ID
	}
	return ids
}
