package harness

// The image with the project's binaries in /usr/local/bin: made once per
// set of binaries (their names and bytes) beside the image they are
// added to, so a VM boots with them in place instead of receiving them
// over ssh (an emulated guest decrypts about 5 MB/s: 13 s a VM).
//
// The layer is a copy of the image's base.img (sparse: its 700 MB of
// data) with the binaries written into its ext4 file system by debugfs,
// which edits an unmounted file system in user space: nothing is mounted
// on the host.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// layersKept is how many layers an image keeps: each test run builds its
// binaries anew, and a new commit's are other bytes.
const layersKept = 3

// binariesLayer returns the path of img's base with bins (name in
// /usr/local/bin -> path on the host) added, making it first if need be.
func binariesLayer(img *vmImage, bins map[string]string, logf func(string, ...any)) (string, error) {
	key, err := binariesKey(bins)
	if err != nil {
		return "", err
	}
	dir, err := cachedBuild(filepath.Join(img.dir, "layers"), key, "vm image with the binaries", func(dir string) error {
		return buildLayer(img, bins, filepath.Join(dir, "base.img"))
	}, logf)
	if err != nil {
		return "", err
	}
	pruneLayers(filepath.Join(img.dir, "layers"), logf)
	return filepath.Join(dir, "base.img"), nil
}

// binariesKey names a set of binaries by their names and contents.
func binariesKey(bins map[string]string) (string, error) {
	names := make([]string, 0, len(bins))
	for n := range bins {
		if strings.ContainsAny(n, "/ \n") || n == "" {
			return "", fmt.Errorf("binary name %q: want a file name in /usr/local/bin", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		f, err := os.Open(bins[n])
		if err != nil {
			return "", fmt.Errorf("binary %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s\n", n)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("binary %s: %w", n, err)
		}
		fmt.Fprint(h, "\n")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildLayer copies the image's base to dst and writes the binaries into
// it as root's, mode 0755, as install(1) would have.
func buildLayer(img *vmImage, bins map[string]string, dst string) error {
	logPath := filepath.Join(filepath.Dir(dst), "build.log")
	if err := runLogged(logPath, nil, "cp", "--sparse=always", img.Base, dst); err != nil {
		return err
	}
	if err := os.Chmod(dst, 0o644); err != nil {
		return err
	}
	var cmds strings.Builder
	cmds.WriteString("cd /usr/local/bin\n")
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// debugfs reads a command per line, its arguments split at
		// spaces: a path with one cannot be said.
		if strings.ContainsAny(bins[n], " \n\"") {
			return fmt.Errorf("binary %s: path %q has a space or quote debugfs cannot read", n, bins[n])
		}
		fmt.Fprintf(&cmds, "write %s %s\nsif %s mode 0100755\nsif %s uid 0\nsif %s gid 0\n", bins[n], n, n, n, n)
	}
	script := filepath.Join(filepath.Dir(dst), "debugfs.cmds")
	if err := os.WriteFile(script, []byte(cmds.String()), 0o644); err != nil {
		return err
	}
	if err := runLogged(logPath, nil, "debugfs", "-w", "-f", script, dst); err != nil {
		return err
	}
	// debugfs exits 0 whatever a command answered: read each file back.
	for _, n := range names {
		if err := checkLayerFile(dst, "/usr/local/bin/"+n, bins[n]); err != nil {
			return err
		}
	}
	if err := runLogged(logPath, nil, "e2fsck", "-fn", dst); err != nil {
		return err
	}
	return os.Chmod(dst, 0o444) // read-only, as the base
}

// checkLayerFile says whether path in the file system img has src's
// bytes, mode 0755 and owner root.
func checkLayerFile(img, path, src string) error {
	want, err := fileSum(src)
	if err != nil {
		return err
	}
	cmd := newCmd("debugfs", "-R", "cat "+path, img)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	h := sha256.New()
	_, cerr := io.Copy(h, out)
	if err := errors.Join(cerr, cmd.Wait()); err != nil {
		return fmt.Errorf("debugfs -R 'cat %s' %s: %w", path, img, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the layer's %s is not %s (sha256 %s, want %s)", path, src, got, want)
	}
	st, err := newCmd("debugfs", "-R", "stat "+path, img).Output()
	if err != nil {
		return fmt.Errorf("debugfs -R 'stat %s' %s: %w", path, img, err)
	}
	if !regexp.MustCompile(`Mode:\s+0755\b`).Match(st) || !regexp.MustCompile(`User:\s+0\s+Group:\s+0\b`).Match(st) {
		return fmt.Errorf("the layer's %s is not root's with mode 0755:\n%s", path, st)
	}
	return nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// layerIdle is how long a layer beyond the newest layersKept is kept after
// its last use: a VM's qemu opens its backing file again at each power
// cut, so a layer in use must stay.
const layerIdle = 2 * time.Hour

// pruneLayers removes the layers beyond the layersKept most recently used
// that no VM has used for layerIdle.
func pruneLayers(dir string, logf func(string, ...any)) {
	ents, _ := os.ReadDir(dir)
	type layer struct {
		path string
		used time.Time
	}
	var ls []layer
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ls = append(ls, layer{filepath.Join(dir, e.Name()), fi.ModTime()})
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].used.After(ls[j].used) })
	for _, l := range ls[min(len(ls), layersKept):] {
		if time.Since(l.used) < layerIdle {
			continue
		}
		logf("vm image: removed the layer %s, last used %s: %v", l.path, l.used.Format(time.DateTime), os.RemoveAll(l.path))
	}
}
