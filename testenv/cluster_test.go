package testenv_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/testenv"
)

// TestCluster: an R3 stream on the 3-node cluster keeps accepting and
// serving messages when its leader is killed, and the restarted node
// rejoins and catches up.
func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := testenv.NewCluster(t)
	t.Logf("3-node cluster ready in %s", time.Since(start))
	if n := len(strings.Split(c.URLs, ",")); n != testenv.ClusterSize {
		t.Fatalf("URLs = %q, want %d URLs", c.URLs, testenv.ClusterSize)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := c.JetStream(t)
	// Retried (creating the same stream again is a no-op): a fresh cluster
	// on a busy machine may still be settling.
	testenv.Retry(t, time.Minute, func() error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
		return err
	}, "creating the R3 stream T")
	leader := c.WaitStreamLeader(t, "T")
	sent := 0
	publish := func(n int) {
		t.Helper()
		for range n {
			sent++
			// A publish during fail-over may fail: retry it; the message
			// id stores a retry of a publish that did land only once.
			testenv.Retry(t, time.Minute, func() error {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				_, err := js.Publish(pctx, "t.a", []byte("x"), jetstream.WithMsgID(strconv.Itoa(sent)))
				return err
			}, "publishing message %d", sent)
		}
	}
	publish(5)

	c.Kill(leader)
	if c.Running(leader) {
		t.Fatalf("node %d still running after Kill", leader)
	}
	next := c.WaitStreamLeader(t, "T")
	if next == leader {
		t.Fatalf("killed node %d still leads T", leader)
	}
	publish(5)

	c.Restart(leader)
	if !c.Running(leader) {
		t.Fatalf("node %d not running after Restart", leader)
	}
	// The restarted node catches up: every node is current and the stream
	// has a leader and two current followers again, with every message.
	c.WaitStreamCurrent(t, "T")
	testenv.Eventually(t, 30*time.Second, func() bool {
		info, err := js.Stream(ctx, "T")
		if err != nil {
			return false
		}
		si := info.CachedInfo()
		current := 0
		for _, r := range si.Cluster.Replicas {
			if r.Current && !r.Offline {
				current++
			}
		}
		return si.State.Msgs == 10 && si.Cluster.Leader != "" && current == testenv.ClusterSize-1
	}, "stream T to recover 3 current replicas with 10 messages")
	// A plain client on the URL list works too.
	nc, err := nats.Connect(c.URLs)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}
