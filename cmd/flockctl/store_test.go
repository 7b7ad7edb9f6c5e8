package main

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/store"
)

// Tier: unit (no root). store check on a store nats-server wrote: silent
// and zero when it proves itself; when a record's length is flipped, it
// names the file, the damage and the messages past it, and exits non-zero.
func TestStoreCheck(t *testing.T) {
	dir := t.TempDir()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TASKS", Subjects: []string{"tasks.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := js.Publish(ctx, "tasks.worker", []byte("a task")); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()

	check := func() (string, error) {
		var out strings.Builder
		cmd := newStoreCheck()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--dir", dir})
		err := cmd.Execute()
		return out.String(), err
	}
	if out, err := check(); err != nil || !strings.Contains(out, "TASKS     1 blocks, 5 messages, 0 deletions, consumers none: proves itself") {
		t.Errorf("a sound store: %v\n%s", err, out)
	}
	blk := filepath.Join(dir, store.JetStreamDir, "$G", "streams", "TASKS", "msgs", "1.blk")
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	second := int(binary.LittleEndian.Uint32(b) &^ (1 << 31))
	b[second+1] ^= 0xff
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := check()
	if err == nil || !strings.Contains(err.Error(), "has 1 damaged parts") {
		t.Errorf("a damaged store: error %v", err)
	}
	for _, want := range []string{"TASKS     1 blocks, 4 messages, 0 deletions, consumers none: 1 damaged",
		"jetstream/$G/streams/TASKS/msgs/1.blk: ", "fail their checksums", "; 3 messages past it prove themselves"} {
		if !strings.Contains(out, want) {
			t.Errorf("store check does not say %q:\n%s", want, out)
		}
	}
}
