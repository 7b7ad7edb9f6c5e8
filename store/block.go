package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"time"

	"github.com/minio/highwayhash"
)

// A message block is a file of records, each as nats-server's file store
// writes it (server/filestore.go, v2.15; unencrypted, uncompressed, which
// is how the bus makes its streams):
//
//	rl   uint32  the record's length; bit 31: it has headers
//	seq  uint64  bit 62: a tombstone (seq was deleted); bit 63: erased
//	ts   int64   Unix nanoseconds
//	slen uint16  the subject's length
//	subject
//	[hlen uint32, headers]  when bit 31 of rl is set
//	data
//	hash [8]byte HighwayHash-64, keyed by SHA-256("<stream>-<block>"),
//	             of seq, ts, subject, headers and data
//
// A record proves itself by its hash: a torn or flipped one does not.
const (
	recordHeader = 22
	hashSize     = 8
	maxRecord    = 32 << 20 // nats-server's rlBadThresh
	hasHeaders   = 1 << 31
	tombstoneBit = 1 << 62
	erasedBit    = 1 << 63
)

// record is one record of a block that proved itself.
type record struct {
	off       int // where it starts in its block
	seq       uint64
	time      time.Time
	subject   string
	header    []byte // NATS/1.0 headers, as stored
	data      []byte
	tombstone bool // seq was deleted
	erased    bool
}

// span is a byte range of a block, [from, to).
type span struct{ from, to int }

// blockHash is the hash a block's records are checked with.
func blockHash(stream string, index int) hash.Hash64 {
	return keyedHash(fmt.Sprintf("%s-%d", stream, index))
}

// keyedHash is nats-server's checksum: HighwayHash-64 keyed by SHA-256 of
// key.
func keyedHash(key string) hash.Hash64 {
	k := sha256.Sum256([]byte(key))
	h, err := highwayhash.New64(k[:])
	if err != nil {
		panic(err) // only for a key that is not 32 bytes
	}
	return h
}

// scanBlock reads every record of buf that proves itself, and the spans
// that do not. Past a bad span it looks for the next record that proves
// itself, byte by byte: nats-server stops at the first bad record and
// cuts the file there, losing every good one after it.
func scanBlock(buf []byte, h hash.Hash64) (recs []record, bad []span) {
	for i := 0; i < len(buf); {
		if r, n, ok := recordAt(buf, i, h); ok {
			recs = append(recs, r)
			i += n
			continue
		}
		j := i + 1
		for ; j < len(buf); j++ {
			if _, _, ok := recordAt(buf, j, h); ok {
				break
			}
		}
		bad = append(bad, span{i, j})
		i = j
	}
	return recs, bad
}

// recordAt reads the record at buf[i:], if one that proves itself is
// there, and its length.
func recordAt(buf []byte, i int, h hash.Hash64) (record, int, bool) {
	le := binary.LittleEndian
	if i+recordHeader+hashSize > len(buf) {
		return record{}, 0, false
	}
	hdr := buf[i : i+recordHeader]
	rl, slen := le.Uint32(hdr[0:]), int(le.Uint16(hdr[20:]))
	withHeaders := rl&hasHeaders != 0
	rl &^= hasHeaders
	shlen := slen
	if withHeaders {
		shlen += 4
	}
	dlen := int(rl) - recordHeader
	if rl > maxRecord || dlen < hashSize || shlen > dlen-hashSize || i+int(rl) > len(buf) {
		return record{}, 0, false
	}
	body := buf[i+recordHeader : i+int(rl)]
	subj := body[:slen]
	rest := body[slen : dlen-hashSize]
	var headers []byte
	if withHeaders {
		hl := int(le.Uint32(rest))
		if hl > len(rest)-4 {
			return record{}, 0, false
		}
		headers, rest = rest[4:4+hl], rest[4+hl:]
	}
	h.Reset()
	h.Write(hdr[4:20])
	h.Write(subj)
	if withHeaders {
		h.Write(body[slen+4 : dlen-hashSize])
	} else {
		h.Write(body[slen : dlen-hashSize])
	}
	var sum [hashSize]byte
	if !bytes.Equal(h.Sum(sum[:0]), body[dlen-hashSize:]) {
		return record{}, 0, false
	}
	seq := le.Uint64(hdr[4:])
	return record{
		off:       i,
		seq:       seq &^ (tombstoneBit | erasedBit),
		time:      time.Unix(0, int64(le.Uint64(hdr[12:]))),
		subject:   string(subj),
		header:    headers,
		data:      rest,
		tombstone: seq&tombstoneBit != 0,
		erased:    seq&erasedBit != 0,
	}, int(rl), true
}
