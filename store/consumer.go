package store

import (
	"encoding/binary"
	"errors"
)

// consumerState checks a consumer's o.dat as nats-server decodes it
// (decodeConsumerState, server/filestore.go v2.15), failing where the
// server fails and nowhere else: a magic byte and a version (1 or 2), the
// ack floor and delivered sequences, then the pending deliveries (each
// checked) and the redelivery counts (read leniently), all varints. The
// server refuses to start a consumer whose state does not decode.
func consumerState(buf []byte) error {
	const magic, headerLen, high = 22, 2, 1 << 63
	if len(buf) < headerLen || buf[0] != magic {
		return errors.New("no magic byte")
	}
	version := buf[1]
	if version != 1 && version != 2 {
		return errors.New("unknown version")
	}
	i := headerLen
	uvarint := func() uint64 {
		if i < 0 {
			return 0
		}
		v, n := binary.Uvarint(buf[i:])
		if n <= 0 {
			i = -1
			return 0
		}
		i += n
		return v
	}
	varint := func() {
		if i < 0 {
			return
		}
		_, n := binary.Varint(buf[i:])
		if n <= 0 {
			i = -1
			return
		}
		i += n
	}
	_, ackFloor := uvarint(), uvarint()
	_, delivered := uvarint(), uvarint()
	if i < 0 {
		return errors.New("it ends inside its sequences")
	}
	if ackFloor&high != 0 || delivered&high != 0 {
		return errors.New("its sequences are out of range")
	}
	pending := uvarint()
	if pending == 0 {
		return nil
	}
	varint() // the oldest delivery's time
	for range pending {
		seq := uvarint()
		if version == 2 {
			uvarint()
		}
		varint()
		if i < 0 {
			return errors.New("it ends inside its pending deliveries")
		}
		if seq+ackFloor == 0 {
			return errors.New("a pending delivery of sequence 0")
		}
	}
	return nil
}
