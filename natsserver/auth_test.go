package natsserver_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/testenv"
)

// TestAuthRefusesClientsWithoutCredentials: a server configured with one
// credential refuses a client without it or with a wrong one (so nobody
// else reaches the JetStream API) and serves one that presents it.
func TestAuthRefusesClientsWithoutCredentials(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	other, _ := nkeys.CreateUser()
	otherPub, _ := other.PublicKey()
	sign := func(kp nkeys.KeyPair) func([]byte) ([]byte, error) { return kp.Sign }

	tests := []struct {
		name  string
		opts  natsserver.Options
		right nats.Option
		wrong nats.Option
	}{
		{"token", natsserver.Options{Token: "s3cret-token"}, nats.Token("s3cret-token"), nats.Token("guess")},
		{"user/password", natsserver.Options{User: "serve", Password: "s3cret-pw"}, nats.UserInfo("serve", "s3cret-pw"), nats.UserInfo("serve", "guess")},
		{"nkey", natsserver.Options{NKey: pub}, nats.Nkey(pub, sign(user)), nats.Nkey(otherPub, sign(other))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Listen, tt.opts.StoreDir = "127.0.0.1:0", t.TempDir()
			s, err := natsserver.Start(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			for what, opts := range map[string][]nats.Option{"no credentials": nil, "wrong credentials": {tt.wrong}} {
				nc, err := s.Connect(append(opts, nats.NoReconnect())...)
				if err == nil {
					nc.Close()
					t.Fatalf("%s: connected, want nats: Authorization Violation", what)
				}
				if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "nats: Authorization Violation") {
					t.Fatalf("%s: err = %v, want nats: Authorization Violation", what, err)
				}
			}
			nc, err := s.Connect(tt.right)
			if err != nil {
				t.Fatalf("with credentials: %v", err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
				t.Fatalf("JetStream with credentials: %v", err)
			}
		})
	}
}

func TestAuthOptionsConflict(t *testing.T) {
	_, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: t.TempDir(), Token: "a", User: "b"})
	if want := "natsserver: set only one of users, token, user/password or nkey"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	_, err = natsserver.Start(context.Background(), natsserver.Options{StoreDir: t.TempDir(), NKey: "SUAbad"})
	if want := "natsserver: nkey is not a public user key (it starts with U)"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestTLS: with a certificate the server takes only TLS clients that trust
// its CA; with a client CA (mutual TLS) only those that present a
// certificate signed by it.
func TestTLS(t *testing.T) {
	f := testenv.NewTLSFiles(t)
	s, err := natsserver.Start(context.Background(), natsserver.Options{
		Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Token: "tok",
		TLS: natsserver.TLS{Cert: f.ServerCert, Key: f.ServerKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if !strings.HasPrefix(s.ClientURL(), "tls://127.0.0.1:") {
		t.Fatalf("ClientURL() = %q, want tls://127.0.0.1:<port>", s.ClientURL())
	}
	// nats:// too: the client switches to TLS when the server requires it.
	plain := "nats://" + strings.TrimPrefix(s.ClientURL(), "tls://")
	if _, err := nats.Connect(plain, nats.Token("tok"), nats.NoReconnect()); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("client without the CA: err = %v, want unknown authority", err)
	}
	if _, err := nats.Connect(plain, nats.Token("tok"), nats.RootCAs(f.OtherCA), nats.NoReconnect()); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("client trusting another CA: err = %v, want unknown authority", err)
	}
	if _, err := nats.Connect(plain, nats.RootCAs(f.CA), nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("TLS client without the token: err = %v, want nats: Authorization Violation", err)
	}
	nc, err := nats.Connect(plain, nats.Token("tok"), nats.RootCAs(f.CA))
	if err != nil {
		t.Fatalf("TLS client with the CA and token: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	nc.Close()

	m, err := natsserver.Start(context.Background(), natsserver.Options{
		Listen: "127.0.0.1:0", StoreDir: t.TempDir(),
		TLS: natsserver.TLS{Cert: f.ServerCert, Key: f.ServerKey, ClientCA: f.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	// TLS 1.3 reports the refusal on the client's first read or write,
	// whichever comes first.
	refused := regexp.MustCompile(`remote error: tls: certificate required|nats: tls error: connection closed by remote after TLS handshake`)
	if _, err := m.Connect(nats.RootCAs(f.CA), nats.NoReconnect()); err == nil || !refused.MatchString(err.Error()) {
		t.Fatalf("mutual TLS, client without a certificate: err = %v, want %s", err, refused)
	}
	nc, err = m.Connect(nats.RootCAs(f.CA), nats.ClientCert(f.ClientCert, f.ClientKey))
	if err != nil {
		t.Fatalf("mutual TLS with a client certificate: %v", err)
	}
	nc.Close()

	_, err = natsserver.Start(context.Background(), natsserver.Options{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), TLS: natsserver.TLS{Cert: f.ServerCert, Key: f.ServerCert}})
	if err == nil || !strings.HasPrefix(err.Error(), "natsserver: nats.server_tls: ") {
		t.Fatalf("a certificate as key: err = %v, want a nats.server_tls error", err)
	}
}
