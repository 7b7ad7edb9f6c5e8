package agent

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// NewLogger writes JSON lines, each with the time and the agent id, to
// stdout (the journal) and to the agent's log file when it has one.
// close flushes and closes the file.
func NewLogger(e Env, stdout io.Writer) (l *slog.Logger, close func() error, err error) {
	w, close := stdout, func() error { return nil }
	if e.LogFile != "" {
		f, err := os.OpenFile(e.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("opening log file %s: %w", e.LogFile, err)
		}
		w, close = io.MultiWriter(stdout, f), f.Close
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(h).With("agent", e.ID), close, nil
}
