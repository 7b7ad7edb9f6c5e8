package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// SecretHash is how a secret is named to a probe that must look for it
// without being given it: hex(sha256(salt || secret)).
func SecretHash(salt, secret string) string {
	sum := sha256.Sum256([]byte(salt + secret))
	return hex.EncodeToString(sum[:])
}

// secretInEnv looks for a secret of length n whose SecretHash with salt
// is hash in every variable of the process's environment (and in extra,
// a control's environment known to hold it): every window of n bytes of
// every NAME=value is hashed.
func secretInEnv(salt, hash string, n int, extra []string) (string, error) {
	if n <= 0 || hash == "" {
		return "", errors.New("no secret to look for")
	}
	env := append(os.Environ(), extra...)
	for _, kv := range env {
		for i := 0; i+n <= len(kv); i++ {
			if SecretHash(salt, kv[i:i+n]) == hash {
				name, _, _ := strings.Cut(kv, "=")
				return "the secret is in " + name, nil
			}
		}
	}
	return "", fmt.Errorf("not in any of its %d variables", len(env))
}

// readSecret reads a file and says only how much it read: a key's
// contents never go into a report.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("read %d bytes", len(b)), nil
}

// modelCall asks the model gateway at base (a provider's base URL) for
// path, the provider's models (its kind's Probe.List), a request that
// spends no tokens, over a socket
// made as uid (0: the process's own; only root may make one as another
// uid, which is how a control calls as the agent granted the provider).
// 2xx is OK; any other answer is the error, with the gateway's message.
func modelCall(ctx context.Context, base, path string, uid int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Api-Key", "flock-audit-placeholder")
	req.Header.Set("Authorization", "Bearer flock-audit-placeholder")
	return answerOf(modelClient(uid).Do(req))
}

// DialAs connects to addr (an IPv4 host:port) over a TCP socket the
// kernel records as uid's: made on a thread whose fsuid is uid (what
// sock_diag reports). Root only: how a control, or a benchmark, plays an
// agent from outside its unit.
func DialAs(ctx context.Context, uid int, addr string) (net.Conn, error) {
	ap, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	fd, err := func() (int, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		old, _ := unix.SetfsuidRetUid(uid)
		defer unix.Setfsuid(old)
		return unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}()
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "model-call")
	defer f.Close()
	c, err := net.FileConn(f)
	if err == nil {
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		} else {
			c.SetDeadline(time.Now().Add(Timeout))
		}
	}
	return c, err
}
