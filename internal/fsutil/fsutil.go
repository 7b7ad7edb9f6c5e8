// Package fsutil holds what flock's packages say about files alike.
package fsutil

import "io/fs"

// TypeName names a file type for an operator: "symlink", "directory",
// "file" or "special file".
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}
