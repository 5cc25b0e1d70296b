package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/testenv"
)

func TestNewNATS(t *testing.T) {
	t.Parallel()
	start := time.Now()
	n := testenv.NewNATS(t)
	t.Logf("NATS with TCP listener ready in %s", time.Since(start))
	if !strings.HasPrefix(n.URL, "nats://127.0.0.1:") {
		t.Fatalf("URL = %q, want nats://127.0.0.1:<port>", n.URL)
	}

	// Another process would dial the URL: do the same.
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	ctx := context.Background()
	js := n.JetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	js2, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js2.Publish(ctx, "t.a", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != "T" || ack.Sequence != 1 {
		t.Fatalf("ack = %+v, want T/1", ack)
	}
	if !n.Conn(t).IsConnected() {
		t.Fatal("Conn is not connected")
	}
}

func TestNewNATSIsolated(t *testing.T) {
	t.Parallel()
	a, b := testenv.NewNATS(t), testenv.NewNATS(t)
	if a.URL == b.URL {
		t.Fatalf("two servers share URL %s", a.URL)
	}
	ctx := context.Background()
	if _, err := a.JetStream(t).CreateStream(ctx, jetstream.StreamConfig{Name: "ONLY_A", Subjects: []string{"a.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JetStream(t).Stream(ctx, "ONLY_A"); err == nil {
		t.Fatal("stream created on server a is visible on server b")
	}
}
