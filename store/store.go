// Package store reads the bus's JetStream store on disk the way
// nats-server writes it, to say what in it proves itself and what does
// not: flockctl store check, the bus's look at its store before it
// starts, and what it keeps of a damaged one (docs/design.md, "A torn or
// corrupted store").
//
// nats-server, finding a record that fails its checksum, cuts the block
// file there and drops every record after it, good or not; a consumer
// whose state file it cannot read keeps the bus from starting. Check
// finds both before the server does, Read gives every record that proves
// itself, and SetAside keeps the damaged files (a copy, or the file moved
// where the server cannot start with it) so nothing is lost unseen.
package store

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where things are under the bus's store directory (flock.service's
// StateDirectory): nats-server's files, and the damaged ones set aside.
const (
	JetStreamDir = "jetstream"
	// AsideDir holds, per moment something was set aside, a tree shaped
	// like the store (jetstream/$G/streams/...) with the damaged files,
	// and report.json. flock never deletes it.
	AsideDir = "damaged"
	account  = "$G"
)

// streamsDir is where the streams' directories are.
func streamsDir(dir string) string { return filepath.Join(dir, JetStreamDir, account, "streams") }

// Action is what the bus does with a damaged file before the server
// starts.
type Action string

const (
	// Copy keeps a copy: the server repairs the file by cutting it.
	Copy Action = "copy"
	// Move takes it out of the store: the server cannot start the stream
	// or consumer with it, and the bus makes it again from its config.
	Move Action = "move"
	// None: nothing to keep (a file the server rebuilds, or one that is
	// missing).
	None Action = "none"
)

// Problem is one thing in the store that does not prove itself.
type Problem struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer,omitempty"`
	File     string `json:"file"` // relative to the store directory
	What     string `json:"what"` // in words, with where
	// Kept is how many records past the damage prove themselves (the
	// server drops them; the bus puts them back). LostBytes are the bytes
	// that prove nothing: what was there is gone.
	Kept      int    `json:"kept,omitempty"`
	LostBytes int    `json:"lost_bytes,omitempty"`
	Action    Action `json:"action"`
}

// Stream is what Check found of one stream.
type Stream struct {
	Name       string    `json:"name"`
	Blocks     int       `json:"blocks"`
	Records    int       `json:"records"`    // messages that prove themselves (deleted ones included)
	Tombstones int       `json:"tombstones"` // records that say a message was deleted
	Consumers  []string  `json:"consumers,omitempty"`
	Problems   []Problem `json:"problems,omitempty"`
	// Notes are what is missing but costs nothing: the server rebuilds it.
	Notes []string `json:"notes,omitempty"`
}

// Report is Check's answer.
type Report struct {
	Dir     string   `json:"dir"`
	Streams []Stream `json:"streams"`
	// Why a store set aside whole was (WhyUnclustered); "" when the
	// operator did (Quarantine) or for a check.
	Why string `json:"why,omitempty"`
}

// Problems are every stream's, in order.
func (r Report) Problems() []Problem {
	var ps []Problem
	for _, s := range r.Streams {
		ps = append(ps, s.Problems...)
	}
	return ps
}

// Damaged reports whether anything does not prove itself.
func (r Report) Damaged() bool { return len(r.Problems()) > 0 }

// Check reads every stream of the store in dir (a bus's StoreDir) and
// says what does not prove itself. It changes nothing. A store that does
// not exist yet is empty, not an error.
func Check(dir string) (Report, error) {
	r := Report{Dir: dir}
	names, err := dirNames(streamsDir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("checking the store %s: %w", dir, err)
	}
	for _, name := range names {
		s, err := checkStream(dir, name)
		if err != nil {
			return r, fmt.Errorf("checking the store %s: stream %s: %w", dir, name, err)
		}
		r.Streams = append(r.Streams, s)
	}
	return r, nil
}

func checkStream(dir, name string) (Stream, error) {
	s := Stream{Name: name}
	sdir := filepath.Join(streamsDir(dir), name)
	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }
	if p := checkMeta(sdir, name); p != nil {
		p.Stream, p.File = name, rel(filepath.Join(sdir, metaFile))
		s.Problems = append(s.Problems, *p)
	}
	blocks, err := blockFiles(sdir)
	if err != nil {
		return s, err
	}
	s.Blocks = len(blocks)
	for _, b := range blocks {
		buf, err := os.ReadFile(b.path)
		if err != nil {
			return s, err
		}
		recs, bad := scanBlock(buf, blockHash(name, b.index))
		for _, r := range recs {
			if r.tombstone {
				s.Tombstones++
			} else {
				s.Records++
			}
		}
		if len(bad) == 0 {
			continue
		}
		s.Problems = append(s.Problems, blockProblem(name, rel(b.path), buf, recs, bad, b.index == blocks[len(blocks)-1].index))
	}
	if _, err := os.Stat(filepath.Join(sdir, "msgs", "index.db")); errors.Is(err, fs.ErrNotExist) && len(blocks) > 0 {
		s.Notes = append(s.Notes, "msgs/index.db is missing: the server rebuilds it from the blocks")
	}
	consumers, err := dirNames(filepath.Join(sdir, "obs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	for _, c := range consumers {
		s.Consumers = append(s.Consumers, c)
		if p := checkConsumer(filepath.Join(sdir, "obs", c), name, c); p != nil {
			p.Stream, p.Consumer, p.File = name, c, rel(filepath.Join(sdir, "obs", c))
			s.Problems = append(s.Problems, *p)
		}
	}
	return s, nil
}

// blockProblem says what a block's bad spans cost: the server keeps the
// records before the first and drops the rest. A torn record at the end
// of the last block is a write cut short (the bus or the machine stopped
// in its middle): nothing past it to keep, so no copy is kept either, or
// every power cut would leave one.
func blockProblem(stream, file string, buf []byte, recs []record, bad []span, last bool) Problem {
	first := bad[0]
	kept, lost := 0, 0
	for _, sp := range bad {
		lost += sp.to - sp.from
	}
	for _, r := range recs {
		if !r.tombstone && r.off > first.from {
			kept++
		}
	}
	if len(bad) == 1 && first.to == len(buf) {
		p := Problem{Stream: stream, File: file, LostBytes: lost, Action: Copy,
			What: fmt.Sprintf("the block ends in a torn record: its last %d bytes (from byte %d) prove nothing", lost, first.from)}
		if last {
			p.Action = None
			p.What += "; a write cut short when the bus or the machine stopped (with bus.sync: always it was never acknowledged)"
		}
		return p
	}
	return Problem{Stream: stream, File: file, Kept: kept, LostBytes: lost, Action: Copy,
		What: fmt.Sprintf("%d bytes from byte %d fail their checksums (%d damaged spans)", lost, first.from, len(bad))}
}

// blockFile is one msgs/<index>.blk.
type blockFile struct {
	index int
	path  string
}

func blockFiles(sdir string) ([]blockFile, error) {
	names, err := dirNames(filepath.Join(sdir, "msgs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []blockFile
	for _, n := range names {
		i, err := strconv.Atoi(strings.TrimSuffix(n, ".blk"))
		if err != nil || !strings.HasSuffix(n, ".blk") {
			continue
		}
		out = append(out, blockFile{i, filepath.Join(sdir, "msgs", n)})
	}
	slices.SortFunc(out, func(a, b blockFile) int { return a.index - b.index })
	return out, nil
}

// dirNames are the names in dir, sorted.
func dirNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, nil
}

// The metadata files of a stream or consumer: its config as JSON, and
// the config's HighwayHash-64 in hex, keyed by SHA-256 of the stream's
// name (a consumer's: "<stream>/<consumer>").
const (
	metaFile = "meta.inf"
	sumFile  = "meta.sum"
)

// checkMeta says what is wrong with the metadata in dir, or nil. A stream
// without it is skipped by the server: the bus makes it again, over the
// same blocks. One whose checksum fails is moved aside for the same.
func checkMeta(dir, key string) *Problem {
	meta, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &Problem{What: "meta.inf is missing: the server skips it and the bus makes it again from its config", Action: None}
	}
	if err != nil {
		return &Problem{What: fmt.Sprintf("meta.inf cannot be read: %v", err), Action: None}
	}
	sum, err := os.ReadFile(filepath.Join(dir, sumFile))
	if err != nil {
		return &Problem{What: "meta.sum is missing: meta.inf cannot be proven; it is moved aside and the bus makes it again from its config", Action: Move}
	}
	h := keyedHash(key)
	h.Write(meta)
	if hex.EncodeToString(h.Sum(nil)) != strings.TrimSpace(string(sum)) {
		return &Problem{What: "meta.inf fails its checksum (meta.sum): it is moved aside and the bus makes it again from its config", Action: Move}
	}
	return nil
}

// checkConsumer says what is wrong with a consumer's directory, or nil:
// its metadata, and its state (o.dat), which the server refuses to start
// with when it cannot decode it.
func checkConsumer(dir, stream, name string) *Problem {
	if p := checkMeta(dir, stream+"/"+name); p != nil {
		if p.Action == Move { // its state alone would not be reused
			p.What = strings.Replace(p.What, "it is moved aside", "the consumer is moved aside", 1)
		}
		return p
	}
	buf, err := os.ReadFile(filepath.Join(dir, "o.dat"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never written: nothing delivered yet
	}
	if err != nil {
		return &Problem{What: fmt.Sprintf("o.dat cannot be read: %v", err), Action: Move}
	}
	if err := consumerState(buf); err != nil {
		return &Problem{What: fmt.Sprintf("its state (o.dat) cannot be decoded (%v): the server would not start it; it is moved aside and the bus makes the consumer again, which hands out every task still queued again", err), Action: Move}
	}
	return nil
}
