package spec

import "testing"

// Tier: unit. Ids read as ranges, sorted and without repeats, and a flock
// with many holes is named in a few ranges and a count.
func TestIDRanges(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{1, 2, 3, 4}, "1-4"},
		{[]int{9, 1, 2, 7, 10, 2}, "1-2, 7, 9-10"},
		{[]int{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}, "1, 3, 5, 7, 9, 11, 13, 15 and 2 more ranges"},
	} {
		if got := IDRanges(tc.ids); got != tc.want {
			t.Errorf("IDRanges(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
