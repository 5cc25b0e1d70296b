package testenv

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/natsserver"
)

// NATS is an embedded JetStream server listening on a random 127.0.0.1
// port, with its store in a temp directory. It stops when the test ends.
type NATS struct {
	// URL is the client URL ("nats://127.0.0.1:<port>") for code that dials.
	URL    string
	Server *natsserver.Server
	users  []*server.User
}

// NewNATS starts a fresh server for t.
func NewNATS(t testing.TB) *NATS {
	t.Helper()
	return NewNATSWithUsers(t, nil)
}

// NewNATSWithUsers starts a fresh server that accepts only users, each
// limited to its permissions. Conn and JetStream connect as the first
// user; ConnAs as any of them.
func NewNATSWithUsers(t testing.TB, users []*server.User) *NATS {
	t.Helper()
	return newNATS(t, natsserver.Options{Users: users})
}

// NewNATSWithMaxPayload starts a fresh server whose max_payload is n bytes.
func NewNATSWithMaxPayload(t testing.TB, n int32) *NATS {
	t.Helper()
	return newNATS(t, natsserver.Options{MaxPayload: n})
}

func newNATS(t testing.TB, o natsserver.Options) *NATS {
	t.Helper()

	// TempDir first: cleanups run in reverse, so the server stops before
	// its store is removed.
	dir := t.TempDir()
	o.Listen, o.StoreDir = "127.0.0.1:0", dir
	s, err := natsserver.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("testenv: start NATS: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return &NATS{URL: s.ClientURL(), Server: s, users: o.Users}
}

// Conn opens a client connection that is closed when the test ends (as the
// first user when the server has users).
func (n *NATS) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	user := ""
	if len(n.users) > 0 {
		user = n.users[0].Username
	}
	return n.ConnAs(t, user)
}

// ConnAs opens a connection as user ("" for none) that is closed when the
// test ends. Extra options (an error handler, say) are applied last.
func (n *NATS) ConnAs(t testing.TB, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	all := []nats.Option{nats.Name(t.Name())}
	if user != "" {
		u := n.user(user)
		if u == nil {
			t.Fatalf("testenv: no NATS user %q", user)
		}
		all = append(all, nats.UserInfo(u.Username, u.Password))
	}
	nc, err := n.Server.Connect(append(all, opts...)...)
	if err != nil {
		t.Fatalf("testenv: connect NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (n *NATS) user(name string) *server.User {
	for _, u := range n.users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// JetStream opens a new connection and returns its JetStream context.
func (n *NATS) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.Conn(t))
	if err != nil {
		t.Fatalf("testenv: JetStream: %v", err)
	}
	return js
}

// passwordVar is a password variable of a documented configuration.
var passwordVar = regexp.MustCompile(`\$[A-Z][A-Z0-9_]*_PASSWORD\b`)

// NATSUsersFromDoc loads the users of the first ```conf block (a
// nats-server configuration) in the markdown file doc, so that tests run
// the documented permission sets themselves. A password written as
// $<ROLE>_PASSWORD is "<role>-secret", the role in lower case with '-'
// for '_' (WEATHER_PRODUCER: "weather-producer-secret").
func NATSUsersFromDoc(t *testing.T, doc string) []*server.User {
	t.Helper()
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(text), "```conf\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("testenv: %s has no ```conf block", doc)
	}

	// Substituted in the text rather than set in the environment, so that
	// the tests that call this can run in parallel.
	block = passwordVar.ReplaceAllStringFunc(block, func(v string) string {
		role := strings.ReplaceAll(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(v, "$"), "_PASSWORD")), "_", "-")
		return strconv.Quote(role + "-secret")
	})
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("testenv: the configuration in %s: %v", doc, err)
	}
	if len(opts.Users) == 0 {
		t.Fatalf("testenv: the configuration in %s has no users", doc)
	}
	return opts.Users
}
