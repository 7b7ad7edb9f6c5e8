package secrets

// Unit tier.

import "testing"

func TestValue(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"ghp_abc\n", "ghp_abc"},
		{"  ghp_abc \r\n", "ghp_abc"},
		{"ghp_abc", "ghp_abc"},
		{"", ""},
		{" \n", ""},
		{"one\ntwo\n", ""},
		{"a\x00b", ""},
	} {
		got, err := Value([]byte(tc.file))
		if string(got) != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("Value(%q) = %q, %v; want %q", tc.file, got, err, tc.want)
		}
	}
}
