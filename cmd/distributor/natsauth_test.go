package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// writeSeed writes a new user nkey seed file and returns its path and seed.
func writeSeed(t *testing.T, dir, name string) (path, seed string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, append(s, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, string(s)
}

// embeddedEnv writes a configuration without nats.url (serve embeds its
// server on a free port) whose nats block adds auth.
func embeddedEnv(t *testing.T, addr, auth string) *natsEnv {
	t.Helper()
	return writeNATSConfig(t, "  listen: "+addr+"\n  store_dir: "+filepath.Join(t.TempDir(), "nats")+"\n"+auth)
}

// TestServeEmbeddedServerEnforcesAuth: `serve` without nats.url gives its
// embedded server the credential of the configuration; commands with the
// same configuration publish through it (serve, publish, events tail,
// direct-mode apply) while a client without it, or with a wrong one, is
// refused and never reaches the JetStream API.
func TestServeEmbeddedServerEnforcesAuth(t *testing.T) {
	keys := t.TempDir()
	seed, _ := writeSeed(t, keys, "serve.nk")
	otherSeed, _ := writeSeed(t, keys, "other.nk")
	f := testenv.NewTLSFiles(t)
	serverTLS := "  server_tls: {cert: " + f.ServerCert + ", key: " + f.ServerKey + "}\n"
	mutualTLS := "  server_tls: {cert: " + f.ServerCert + ", key: " + f.ServerKey + ", client_ca: " + f.CA + "}\n"

	violation := regexp.QuoteMeta("nats: Authorization Violation (the server refused the credentials: check nats.token, nats.user/password, nats.nkey_seed or nats.creds)\n") + "$"
	const unknownCA = `x509: certificate signed by unknown authority\n$`
	// stderr is a regular expression.
	type refused struct{ auth, stderr string }
	tests := []struct {
		name    string
		auth    string
		refused []refused
	}{
		{"token", "  token: s3cret-token\n", []refused{{"", violation}, {"  token: guess\n", violation}}},
		{"user/password", "  user: serve\n  password: s3cret-pw\n", []refused{{"", violation}, {"  user: serve\n  password: guess\n", violation}}},
		{"nkey", "  nkey_seed: " + seed + "\n", []refused{{"", violation}, {"  nkey_seed: " + otherSeed + "\n", violation}}},
		{"tls", "  token: s3cret-token\n" + serverTLS + "  tls: {ca: " + f.CA + "}\n", []refused{
			{"  token: s3cret-token\n", unknownCA},
			{"  token: s3cret-token\n  tls: {ca: " + f.OtherCA + "}\n", unknownCA},
			{"  tls: {ca: " + f.CA + "}\n", violation},
		}},
		{"mutual tls", mutualTLS + "  tls: {ca: " + f.CA + ", cert: " + f.ClientCert + ", key: " + f.ClientKey + "}\n", []refused{
			// TLS 1.3 reports the refused handshake on the first read
			// or write, whichever happens first.
			{"  tls: {ca: " + f.CA + "}\n", `(remote error: tls: certificate required|nats: tls error: connection closed by remote after TLS handshake)`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "token" { // it sets the environment (below)
				t.Parallel()
			}
			addr := testenv.FreeAddr(t)
			e := embeddedEnv(t, addr, tt.auth)
			startServe(t, e.cfg)
			b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
			code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.two", "--bundle", b1)
			if code != 0 {
				t.Fatalf("publish with the credentials: exit %d\n%s%s", code, stdout, stderr)
			}
			assertBlocks(t, "publish --wait", stdout, "published d3 p.two written 2, unchanged 0, deleted 0 | + data.csv | + report.md")
			if code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.one", "--bundle", b1); code != 0 {
				t.Fatalf("apply with the credentials: exit %d\n%s%s", code, stdout, stderr)
			}
			// apply took the KV lease and reported through NATS.
			if got := len(e.tailJSON(t, "--type", "published")); got != 3 {
				t.Errorf("%d published events, want 3 (publish to d3, apply to d1 and d2)", got)
			}

			// An anonymous client cannot reach the JetStream API.
			if nc, err := nats.Connect("nats://"+addr, nats.NoReconnect()); err == nil {
				nc.Close()
				t.Fatal("a client without credentials connected")
			} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
				t.Fatalf("client without credentials: err = %v", err)
			}
			for _, r := range tt.refused {
				bad := embeddedEnv(t, addr, r.auth)
				// The same bundle, in the other configuration's bundle_locations.
				badB1 := bad.makeBundle(t, "b1", "src.one", bundleOne)
				// apply of another configuration does not join serve's
				// NATS at all: the lock object alone, and no event.
				if code, stdout, stderr := bad.cmd(t, "apply", "--pipeline", "p.two", "--bundle", badB1); code != 0 || stderr != "" {
					t.Errorf("apply of another configuration with %q: exit %d, stderr %q; want 0 and no NATS\n%s", r.auth, code, stderr, stdout)
				}
				// Told where serve's server is, its NATS commands are refused.
				badURL := writeNATSConfig(t, "  url: nats://"+addr+"\n"+r.auth)
				for _, args := range [][]string{
					{"publish", "--pipeline", "p.two", "--bundle", badURL.makeBundle(t, "b1", "src.one", bundleOne)},
					{"events", "tail"},
				} {
					code, stdout, stderr := badURL.cmd(t, args...)
					prefix := "distributor: connect to NATS at nats://" + addr + ": "
					if code == 0 || stdout != "" || !strings.HasPrefix(stderr, prefix) || !regexp.MustCompile(r.stderr).MatchString(stderr) || strings.Count(stderr, "\n") != 1 {
						t.Errorf("%v with %q: exit %d, stdout %q, stderr %q; want %q…%q", args, r.auth, code, stdout, stderr, prefix, r.stderr)
					}
				}
			}
			if tt.name == "token" {
				// The serve this configuration advertises refuses another
				// token: apply says so rather than skip the KV lease.
				t.Setenv("DISTRIBUTOR_NATS_TOKEN", "guess")
				code, stdout, stderr := e.cmd(t, "apply", "--pipeline", "p.two", "--bundle", b1)
				prefix := "distributor: connect to NATS at nats://" + addr + ": "
				if code == 0 || stdout != "" || !strings.HasPrefix(stderr, prefix) || !regexp.MustCompile(violation).MatchString(stderr) {
					t.Errorf("apply with DISTRIBUTOR_NATS_TOKEN=guess: exit %d, stdout %q, stderr %q; want %q…%q", code, stdout, stderr, prefix, violation)
				}
				os.Unsetenv("DISTRIBUTOR_NATS_TOKEN")
			}
			if got := len(e.tailJSON(t)); got != 3 {
				t.Errorf("%d events after the refused clients, want still 3", got)
			}
		})
	}
}

// TestServeEmbeddedServerRefusesCreds: the embedded server cannot check
// JWT credentials, so `serve` says to use an external server instead of
// running one that accepts anybody.
func TestServeEmbeddedServerRefusesCreds(t *testing.T) {
	t.Parallel()
	e := embeddedEnv(t, testenv.FreeAddr(t), "  creds: "+filepath.Join(t.TempDir(), "user.creds")+"\n")
	code, stdout, stderr := e.cmd(t, "serve")
	want := "distributor: nats.creds needs an external NATS server: set nats.url, or use nats.token, nats.user/password or nats.nkey_seed with the embedded server\n"
	if code != exitUsage || stdout != "" || stderr != want {
		t.Errorf("serve with creds and no nats.url: exit %d, stdout %q, stderr %q; want %d, %q", code, stdout, stderr, exitUsage, want)
	}
	notSeed := e.cfg
	e = embeddedEnv(t, testenv.FreeAddr(t), "  nkey_seed: "+notSeed+"\n")
	code, _, stderr = e.cmd(t, "serve")
	want = "distributor: nats.nkey_seed " + notSeed + ": nkeys: no nkey seed found: the file must hold a user seed (SU…), as `nk -gen user` writes\n"
	if code != exitUsage || stderr != want {
		t.Errorf("serve with a seed file that is no seed: exit %d, stderr %q; want %d, %q", code, stderr, exitUsage, want)
	}
}

// TestCredentialsStayOutOfLogsAndEvents runs serve (at debug level) and
// publish with each secret and checks that no log line, output or event
// carries it, and that a URL's user information is redacted in errors.
func TestCredentialsStayOutOfLogsAndEvents(t *testing.T) {
	t.Parallel()
	seedFile, seed := writeSeed(t, t.TempDir(), "serve.nk")
	tests := []struct{ name, auth, secret string }{
		{"token", "  token: tok-4f9a1c\n", "tok-4f9a1c"},
		{"password", "  user: serve\n  password: pw-77e0b2\n", "pw-77e0b2"},
		{"nkey seed", "  nkey_seed: " + seedFile + "\n", seed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := embeddedEnv(t, testenv.FreeAddr(t), tt.auth)
			s := startServe(t, e.cfg, "--log-level", "debug")
			b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
			var outputs []string
			for _, args := range [][]string{
				{"publish", "--wait", "--pipeline", "p.one", "--bundle", b1, "--log-level", "debug"},
				{"publish", "--wait", "--pipeline", "p.nope", "--bundle", b1, "--log-level", "debug"}, // a failed event
				{"apply", "--pipeline", "p.two", "--bundle", b1, "--log-level", "debug"},
				{"events", "tail", "--json"},
			} {
				_, stdout, stderr := e.cmd(t, args...)
				outputs = append(outputs, stdout, stderr)
			}
			if got := len(e.tailJSON(t)); got != 4 {
				t.Fatalf("%d events, want 4 (published d1, d2, d3; failed p.nope)", got)
			}
			// The stored messages themselves (bodies and headers), as
			// downstream readers and replay see them.
			outputs = append(outputs, storedMessages(t, e.cfg)...)
			s.stop(t)
			outputs = append(outputs, s.stderr.String())
			if !strings.Contains(s.stderr.String(), `"reason":"unknown_pipeline"`) {
				t.Errorf("serve did not log the failed event; the test would miss what it logs:\n%s", s.stderr.String())
			}
			for _, out := range outputs {
				if strings.Contains(out, tt.secret) {
					t.Fatalf("the secret appears in:\n%s", out)
				}
			}
		})
	}

	// A URL with user information, an unreachable server: the error names
	// the server, never the credentials.
	e := writeNATSConfig(t, "  url: nats://serve:pw-77e0b2@"+testenv.FreeAddr(t)+",nats://tok-4f9a1c@"+testenv.FreeAddr(t)+"\n")
	b := e.makeBundle(t, "b", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--pipeline", "p.one", "--bundle", b)
	if code == 0 || strings.Contains(stdout+stderr, "pw-77e0b2") || strings.Contains(stdout+stderr, "tok-4f9a1c") || !strings.Contains(stderr, "nats://REDACTED@127.0.0.1:") {
		t.Errorf("publish to a URL with credentials: exit %d, stdout %q, stderr %q; want the URL redacted", code, stdout, stderr)
	}
	bad := writeNATSConfig(t, "  url: http://serve:pw-77e0b2@127.0.0.1:4222\n")
	_, _, stderr = bad.cmd(t, "config", "validate")
	if want := `nats.url "http://REDACTED@127.0.0.1:4222": server "http://REDACTED@127.0.0.1:4222" has scheme "http": use nats://, tls://, ws:// or wss://`; !strings.Contains(stderr, want) {
		t.Errorf("config validate with a bad URL: stderr %q, want it to contain %q", stderr, want)
	}
}

// storedMessages returns every message of the bundle and event streams,
// headers and body, read with the credentials of the configuration cfg.
func storedMessages(t *testing.T, cfgPath string) []string {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cfg.NATS.ConnectURL(), natsOptions(cfg.NATS)...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out []string
	for _, name := range []string{events.Subjects{}.BundlesStream(), events.Subjects{}.EventsStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %v %s", m.Subject, m.Header, m.Data))
		}
	}
	if len(out) < 6 {
		t.Fatalf("%d stored messages, want at least 6 (2 bundle-ready, 4 results)", len(out))
	}
	return out
}
