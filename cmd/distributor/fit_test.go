package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// Rule: a failed result whose original was left out to fit the size limit
// (it only refers to the bundle-ready message) is still replayed: `replay
// --id`, with the documented operator permissions, fetches the original by
// its stream sequence and re-announces it; once the original is gone from
// the stream, replay says so.
func TestReplayResolvesOriginalReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	users := testenv.NATSUsersFromDoc(t, "../../docs/nats-permissions.md")
	n := testenv.NewNATSWithUsers(t, append([]*server.User{{Username: "test", Password: "test"}}, users...))
	e := writeNATSConfig(t, "  url: "+n.URL+"\n  user: operator\n  password: operator-secret\n")
	e.url, e.nats = n.URL, n
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish: exit %d: %s", code, stderr)
	}
	orig := announcedID(t, stdout)
	seq, _ := strconv.ParseUint(announcedRE.FindStringSubmatch(stdout)[4], 10, 64)

	// serve's side: a failure whose message leaves no room for the original.
	subjects := events.Subjects{}
	js, err := jetstream.New(n.ConnAs(t, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := n.JetStream(t).Stream(ctx, subjects.BundlesStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundles.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.DecodeBundleReady(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 3000
	message := strings.Repeat("disk full; ", 230)
	ref := events.MsgRef{Stream: subjects.BundlesStream(), Seq: seq}
	if _, err := events.NewPublisher(js, subjects, events.WithMaxResultBytes(limit)).PublishResult(ctx, events.Result{
		Type: events.TypeFailed, BundleEventID: orig, PipelineID: "p.one", DestinationID: "d1",
		Reason: events.ReasonStorage, Message: message, Attempts: 5, Original: &ev, OriginalRef: &ref,
	}); err != nil {
		t.Fatal(err)
	}
	failed := e.tailJSON(t, "--type", "failed")
	if len(failed) != 1 || failed[0].Original != nil || failed[0].OriginalRef == nil || *failed[0].OriginalRef != ref || failed[0].Message != message {
		t.Fatalf("stored failed events %+v: want one with reference %+v instead of its original, message whole", failed, ref)
	}

	code, stdout, stderr = e.cmd(t, "replay", "--id", orig)
	if code != 0 || !strings.HasPrefix(stdout, "replayed "+orig+" as ") || !strings.HasSuffix(stdout, " (destinations [d1])\n") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("replay --id: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	last, err := bundles.GetLastMsgForSubject(ctx, subjects.BundleReady("p.one"))
	if err != nil {
		t.Fatal(err)
	}
	re, err := events.DecodeBundleReady(last.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(re.ID, orig+".replay.") || re.ReplayOf != orig || re.Bundle != b1 || re.ManifestDigest != ev.ManifestDigest ||
		len(re.Destinations) != 1 || re.Destinations[0] != "d1" || re.TakeOwnership || re.AllowOlder {
		t.Errorf("replayed event %+v: want a replay of %s for [d1] with bundle %s", re, orig, b1)
	}

	// The original aged out of the stream: replay names what it cannot do.
	if err := bundles.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = e.cmd(t, "replay", "--id", orig)
	want := "cannot replay failed event " + orig + ".d1: its bundle-ready event (DISTRIBUTOR_BUNDLES seq " + strconv.FormatUint(seq, 10) + ") is no longer stored\n" +
		"nothing to replay: no failed or collision event matches\n"
	if code != 0 || stdout != want {
		t.Errorf("replay after the original is gone: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
}
