package natsserver_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/testenv"
)

func TestInProcessJetStream(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	s, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in-process ready in %s", time.Since(start))
	defer s.Shutdown()
	if got := s.ClientURL(); got != "" {
		t.Fatalf("ClientURL() = %q, want empty without a listener", got)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "t.x", []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != "T" || ack.Sequence != 1 {
		t.Fatalf("ack = %+v, want stream T seq 1", ack)
	}
}

func TestTCPListenerAndPortInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := natsserver.Start(context.Background(), natsserver.Options{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	url := s.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("ClientURL() = %q, want nats://127.0.0.1:<port>", url)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	if nc.ConnectedUrl() != url {
		t.Fatalf("connected to %q, want %q", nc.ConnectedUrl(), url)
	}
	nc.Close()

	addr := strings.TrimPrefix(url, "nats://")
	start := time.Now()
	_, err = natsserver.Start(context.Background(), natsserver.Options{Listen: addr, StoreDir: t.TempDir()})
	want := "nats.listen " + addr + " is in use: set nats.listen or nats.url"
	if err == nil || err.Error() != want {
		t.Fatalf("second Start on %s: err = %v, want %q", addr, err, want)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("port-in-use error took %s, want immediate", d)
	}
}

func TestPortInUseByOtherProgram(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = natsserver.Start(context.Background(), natsserver.Options{Listen: l.Addr().String(), StoreDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "is in use: set nats.listen or nats.url") {
		t.Fatalf("err = %v, want port in use", err)
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := natsserver.Start(ctx, natsserver.Options{}); err == nil || !strings.Contains(err.Error(), "nats.store_dir") {
		t.Fatalf("empty store dir: err = %v", err)
	}
	if _, err := natsserver.Start(ctx, natsserver.Options{Listen: "localhost", StoreDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not host:port") {
		t.Fatalf("bad listen: err = %v", err)
	}
}

func TestShutdownTwice(t *testing.T) {
	s, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.Shutdown()
	if _, err := s.Connect(); err == nil {
		t.Fatal("Connect after Shutdown succeeded")
	}
}

func TestLoggerReceivesServerLines(t *testing.T) {
	var buf testenv.SyncBuffer
	l := zerolog.New(&buf).Level(zerolog.InfoLevel)
	s, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: t.TempDir(), Logger: &l})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	out := buf.String()
	if !strings.Contains(out, `"level":"info"`) || !strings.Contains(out, "Starting nats-server") {
		t.Fatalf("log output lacks the server's start line:\n%s", out)
	}
	if strings.Contains(out, `"level":"debug"`) {
		t.Fatalf("debug lines logged at info level:\n%s", out)
	}
}
