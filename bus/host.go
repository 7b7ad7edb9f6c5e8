package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/wire"
)

// Host is the bus's side of a host, as the planner sees it: identities on
// disk, the config file the bus reads, and the running bus's reload.
type Host interface {
	creds.Identities
	// Config is the installed config; nil if there is none.
	Config(ctx context.Context) (*Config, error)
	WriteConfig(ctx context.Context, c Config) error
	RemoveConfig(ctx context.Context) error
	// Reload asks the running bus to re-read its config and waits for its
	// answer.
	Reload(ctx context.Context) error
	// Status is what the running bus knows (wire.BusStatus): its Config
	// is the digest of the config it has in force (Config.Digest), the
	// installed one unless a reload was refused or never came.
	Status(ctx context.Context) (*wire.BusStatus, error)
}

// System is the real Host: seeds under spec.CredDir, the config at
// ConfigPath, the bus reached as the operator (or the reader: As).
type System struct {
	creds.Store
	ConfigPath string
	// As is who Status, Permissions and Reload connect as: the operator
	// ("" too), or creds.ReaderName, whose seed the readers' group reads
	// and whose grants (ReaderUser) ask and never change.
	As string
}

var _ Host = (*System)(nil)

// NewSystem is the host's bus at its standard paths.
func NewSystem() *System {
	return &System{Store: creds.Store{Dir: creds.DefaultCredDir}, ConfigPath: ConfigPath}
}

// NewReader is NewSystem reached as the reader: what the read-only verbs
// run by a member of the readers' group use.
func NewReader() *System {
	s := NewSystem()
	s.As = creds.ReaderName
	return s
}

// Config reads the installed config. A damaged one counts as none, so the
// next provision rewrites it.
func (s *System) Config(ctx context.Context) (*Config, error) {
	if _, err := os.Stat(s.ConfigPath); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	c, err := ReadConfig(s.ConfigPath)
	if err != nil {
		return nil, nil
	}
	return &c, nil
}

func (s *System) WriteConfig(ctx context.Context, c Config) error {
	return WriteConfig(s.ConfigPath, c)
}

func (s *System) RemoveConfig(ctx context.Context) error {
	return fsutil.RemoveWithDir(s.ConfigPath)
}

// reloadTimeout bounds a reload: the bus answers once its new users and
// permissions are in force.
const reloadTimeout = 15 * time.Second

func (s *System) Reload(ctx context.Context) error {
	nc, server, err := s.operator(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, wire.OnServer(wire.ReloadSubject, server), nil)
	if err != nil {
		return fmt.Errorf("asking the bus to reload (%s): %w", wire.ReloadSubject, err)
	}
	if len(msg.Data) > 0 {
		return fmt.Errorf("the bus refused its new config: %s", msg.Data)
	}
	return nil
}

// Status asks the running bus what it knows (wire.BusStatus).
func (s *System) Status(ctx context.Context) (*wire.BusStatus, error) {
	nc, server, err := s.operator(ctx)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, wire.OnServer(wire.StatusSubject, server), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wire.StatusSubject, err)
	}
	var st wire.BusStatus
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		return nil, fmt.Errorf("%s answered %q: %w", wire.StatusSubject, msg.Data, err)
	}
	return &st, nil
}

// Permissions asks the running bus for agent id's permissions in force.
func (s *System) Permissions(ctx context.Context, id int) (wire.Permissions, error) {
	nc, server, err := s.operator(ctx)
	if err != nil {
		return wire.Permissions{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, wire.OnServer(wire.PermissionsSubject, server), wire.PermissionsRequest(id))
	if err != nil {
		return wire.Permissions{}, fmt.Errorf("%s (agent %d): %w", wire.PermissionsSubject, id, err)
	}
	return wire.ParsePermissions(msg.Data)
}

// statusTimeout bounds the bus's answer to a status request.
const statusTimeout = 5 * time.Second

// Operator connects to the installed bus as As (flockctl), the operator
// unless it names the reader.
func (s *System) Operator(ctx context.Context) (*nats.Conn, error) {
	nc, _, err := s.operator(ctx)
	return nc, err
}

// operator is Operator and the name this host's bus answers under in a
// cluster ("" on one host), for wire.OnServer.
func (s *System) operator(ctx context.Context) (*nats.Conn, string, error) {
	c, err := s.Config(ctx)
	if err != nil {
		return nil, "", err
	}
	if c == nil {
		return nil, "", fmt.Errorf("%w: %s is absent; run flockctl provision", ErrNoBus, s.ConfigPath)
	}
	nc, err := s.dial(c)
	return nc, c.server(), err
}

func (s *System) dial(c *Config) (*nats.Conn, error) {
	who, opts := creds.OperatorName, []nats.Option{nats.Name("flockctl"), nats.Timeout(5 * time.Second), nats.MaxReconnects(0)}
	if s.As == creds.ReaderName {
		// Its grants let it hear its own inbox alone.
		who, opts = s.As, append(opts, nats.CustomInboxPrefix(wire.ReaderInbox))
	}
	opt, err := nats.NkeyOptionFromSeed(s.Path(who))
	if err != nil {
		return nil, fmt.Errorf("the %s's bus credential %s: %w", who, s.Path(who), err)
	}
	nc, err := nats.Connect("nats://"+c.Listen, append(opts, opt)...)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to %s as the %s: %v (see: systemctl status %s)", ErrNoBus, c.Listen, who, err, "flock.service")
	}
	return nc, nil
}

// ErrNoBus means the bus cannot be reached (not provisioned, or down).
var ErrNoBus = errors.New("the bus is not reachable")
