package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startBooting starts a shell script as the harness starts nspawn or
// qemu: its output in a file, a console log beside it.
func startBooting(t *testing.T, script string) *booting {
	t.Helper()
	dir := t.TempDir()
	b := &booting{console: filepath.Join(dir, "console.log"), output: filepath.Join(dir, "out.log")}
	if err := os.WriteFile(b.console, []byte("\x1b[0;32mOK\x1b[0m line 1\r\nline 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(b.output)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	if b.tied, err = startTied(cmd, filepath.Join(dir, "pid")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.kill() })
	return b
}

func TestWaitUp(t *testing.T) {
	never := func(context.Context) (bool, error) { return false, os.ErrNotExist }
	t.Run("a process that never comes up", func(t *testing.T) {
		b := startBooting(t, "exec sleep 30")
		err := b.waitUp(context.Background(), 200*time.Millisecond, bootStep{10 * time.Millisecond, never})
		if err == nil || !strings.Contains(err.Error(), "deadline exceeded; last: file does not exist") ||
			!strings.HasSuffix(err.Error(), "console tail:\nOK line 1\nline 2") {
			t.Errorf("got %v; want the deadline, the last answer and the console's tail", err)
		}
	})
	t.Run("a process that exits", func(t *testing.T) {
		b := startBooting(t, "echo boom >&2; exit 3")
		err := b.waitUp(context.Background(), time.Minute, bootStep{10 * time.Millisecond, never})
		if err == nil || !strings.Contains(err.Error(), "sh (pid") || !strings.Contains(err.Error(), "exited: exit status 3") ||
			!strings.Contains(err.Error(), "out.log:\nboom") {
			t.Errorf("got %v; want its exit and its own output", err)
		}
	})
	t.Run("steps in turn", func(t *testing.T) {
		b := startBooting(t, "exec sleep 30")
		var order []string
		step := func(name string) bootStep {
			return bootStep{time.Millisecond, func(context.Context) (bool, error) { order = append(order, name); return true, nil }}
		}
		if err := b.waitUp(context.Background(), time.Minute, step("a"), step("b")); err != nil || strings.Join(order, "") != "ab" {
			t.Errorf("got %v, steps %v", err, order)
		}
	})
}

func TestBootingStop(t *testing.T) {
	b := startBooting(t, "exec sleep 30")
	if err := b.stop("SIGTERM", func() { _ = b.cmd.Process.Signal(syscall.SIGTERM) }, time.Minute); err != nil {
		t.Errorf("stopped when asked: %v", err)
	}
	b = startBooting(t, "trap '' TERM; echo ready; exec sleep 30")
	// SIGTERM before the trap would end it; ignored, it stays so in sleep.
	ready := func(context.Context) (bool, error) {
		out, err := os.ReadFile(b.output)
		return strings.Contains(string(out), "ready"), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.poll(ctx, 10*time.Millisecond, ready); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err := b.stop("SIGTERM", func() { _ = b.cmd.Process.Signal(syscall.SIGTERM) }, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still running 200ms after SIGTERM; killed it") || time.Since(t0) > killWait {
		t.Errorf("got %v after %v; want it killed past the grace", err, time.Since(t0))
	}
	if gone, _ := b.exited(); !gone {
		t.Errorf("still running after stop")
	}
}
