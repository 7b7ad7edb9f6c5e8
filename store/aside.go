package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
	"github.com/nats-io/nats.go"
)

// Msg is a stored message that proves itself, as it was stored.
type Msg struct {
	Stream  string
	Seq     uint64
	Time    time.Time
	Subject string
	Header  nats.Header
	Data    []byte
}

// Read is every message of stream name in dir (a store, or a tree set
// aside) that proves itself and was not deleted there (no tombstone says
// so), by sequence.
func Read(dir, name string) ([]Msg, error) {
	blocks, err := blockFiles(filepath.Join(streamsDir(dir), name))
	if err != nil {
		return nil, fmt.Errorf("reading stream %s in %s: %w", name, dir, err)
	}
	var recs []record
	deleted := map[uint64]bool{}
	for _, b := range blocks {
		buf, err := os.ReadFile(b.path)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		got, _ := scanBlock(buf, blockHash(name, b.index))
		for _, r := range got {
			if r.tombstone || r.erased {
				deleted[r.seq] = true
				continue
			}
			recs = append(recs, r)
		}
	}
	var out []Msg
	seen := map[uint64]bool{}
	for _, r := range recs {
		if deleted[r.seq] || seen[r.seq] {
			continue
		}
		seen[r.seq] = true
		m := Msg{Stream: name, Seq: r.seq, Time: r.time, Subject: r.subject, Data: r.data}
		if len(r.header) > 0 {
			if m.Header, err = nats.DecodeHeadersMsg(r.header); err != nil {
				continue // proved by its hash, yet not headers the server wrote
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// The files a set-aside tree holds besides the store's own.
const (
	ReportFile   = "report.json"   // the Report that set it aside
	SalvagedFile = "salvaged.json" // what the bus put back from it, once it has
)

// SetAside keeps what r found damaged in the store dir, under
// dir/damaged/<stamp>/ in the store's own layout: a copy of each file the
// server cuts (Copy) with its stream's metadata, and each file the server
// cannot start with moved there (Move). It writes r as report.json there
// and returns that directory; "" when nothing needed keeping.
func SetAside(dir string, r Report, stamp string) (string, error) {
	aside := filepath.Join(dir, AsideDir, stamp)
	kept := false
	for _, p := range r.Problems() {
		if p.Action == None {
			continue
		}
		from, to := filepath.Join(dir, p.File), filepath.Join(aside, p.File)
		if err := mkdirLike(dir, filepath.Dir(to)); err != nil {
			return "", err
		}
		switch p.Action {
		case Copy:
			if err := copyFile(from, to); err != nil {
				return "", err
			}
			sdir := filepath.Join(streamsDir(dir), p.Stream)
			for _, f := range []string{metaFile, sumFile} {
				rel, _ := filepath.Rel(dir, filepath.Join(sdir, f))
				if err := copyFile(filepath.Join(dir, rel), filepath.Join(aside, rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return "", err
				}
			}
		case Move:
			if p.Consumer == "" { // a stream's metadata: both files go
				for _, f := range []string{metaFile, sumFile} {
					if err := os.Rename(filepath.Join(filepath.Dir(from), f), filepath.Join(filepath.Dir(to), f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return "", fmt.Errorf("setting %s aside: %w", p.File, err)
					}
				}
			} else if err := os.Rename(from, to); err != nil {
				return "", fmt.Errorf("setting %s aside: %w", p.File, err)
			}
		}
		kept = true
	}
	if !kept {
		return "", nil
	}
	return aside, writeJSON(dir, filepath.Join(aside, ReportFile), r)
}

// Quarantine moves the whole store out of dir (jetstream/, the server's
// files) to dir/damaged/<stamp>/: the next start begins with an empty
// store, and the bus puts back what in the old one proves itself. Run it
// with the bus stopped.
func Quarantine(dir, stamp string) (string, error) { return moveAside(dir, stamp, "") }

// Unclustered says whether the store in dir was made by a bus without a
// cluster: it has streams, and no JetStream cluster's metadata. A server
// started clustered on it recovers its streams, finds them in no
// assignment of the cluster's and deletes them as orphans 30 s later
// (nats-server's checkForOrphans), tasks and all.
func Unclustered(dir string) (bool, error) {
	names, err := dirNames(streamsDir(dir))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(names) == 0) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the store %s: %w", dir, err)
	}
	_, err = os.Stat(filepath.Join(dir, JetStreamDir, "$SYS", "_js_", "_meta_"))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// WhyUnclustered is the reason a store made without a cluster is moved
// aside when its bus joins one (Report.Why).
const WhyUnclustered = "made by this host's bus alone, before it joined a cluster"

// SetAsideUnclustered moves the whole store out of dir as Quarantine
// does, saying why (WhyUnclustered): the clustered server starts on an
// empty store, and the bus puts every task, result and dead letter of the
// old one into the cluster's streams once they exist.
func SetAsideUnclustered(dir, stamp string) (string, error) {
	return moveAside(dir, stamp, WhyUnclustered)
}

func moveAside(dir, stamp, why string) (string, error) {
	r, err := Check(dir)
	if err != nil {
		return "", err
	}
	r.Why = why
	aside := filepath.Join(dir, AsideDir, stamp)
	if err := mkdirLike(dir, aside); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(dir, JetStreamDir), filepath.Join(aside, JetStreamDir)); err != nil {
		return "", fmt.Errorf("moving the store aside: %w", err)
	}
	return aside, writeJSON(dir, filepath.Join(aside, ReportFile), r)
}

// Pending are the trees set aside in dir whose messages the bus has not
// put back yet, oldest first.
func Pending(dir string) ([]string, error) {
	names, err := dirNames(filepath.Join(dir, AsideDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		aside := filepath.Join(dir, AsideDir, n)
		if _, err := os.Stat(filepath.Join(aside, SalvagedFile)); errors.Is(err, fs.ErrNotExist) {
			out = append(out, aside)
		}
	}
	return out, nil
}

// MarkSalvaged writes what was put back from the tree aside (its
// salvaged.json), so it is not put back again.
func MarkSalvaged(aside string, what any) error {
	return writeJSON(filepath.Dir(filepath.Dir(aside)), filepath.Join(aside, SalvagedFile), what)
}

// Stamp names a moment to set things aside at, sortable and safe in a
// path.
func Stamp(t time.Time) string { return t.UTC().Format("20060102T150405.000Z") }

// mkdirLike makes path and its parents below dir, owned as dir is (the
// bus's user, when root sets a store aside for it).
func mkdirLike(dir, path string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	cur := dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			_ = os.Lchown(cur, int(sys.Uid), int(sys.Gid))
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s aside: %w", from, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeJSON writes v to path atomically, owned as dir is.
func writeJSON(dir, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			_ = os.Lchown(path, int(sys.Uid), int(sys.Gid))
		}
	}
	return nil
}
