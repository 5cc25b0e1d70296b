package engine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// foreignIntent stands for the intent of a holder that took the root
// while the one under test was paused past its lease: whatever its bytes,
// it is not the paused holder's to replace or remove.
var foreignIntent = []byte(`{"version": 1, "writes": [], "deletes": ["newer-holder"]}`)

func newS3TestRoot(t *testing.T) storage.Backend {
	t.Helper()
	srv := testenv.NewS3(t)
	return srv.Backend(t, srv.Bucket(t), s3Prefix)
}

func putForeignIntent(t *testing.T, root storage.Backend) {
	t.Helper()
	if _, err := root.Put(context.Background(), engine.IntentPath, bytes.NewReader(foreignIntent), int64(len(foreignIntent)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func wantForeignIntent(t *testing.T, root storage.Backend) {
	t.Helper()
	got, _, err := root.ReadVersion(context.Background(), engine.IntentPath)
	if err != nil || !bytes.Equal(got, foreignIntent) {
		t.Fatalf("intent = %q (%v), want the newer holder's %q", got, err, foreignIntent)
	}
}

// TestS3StaleHolderNeverReplacesANewerHoldersIntent: on S3 the intent is
// written only where none is (If-None-Match: *). A holder paused past its
// lease right before it writes its intent, while another holder wrote
// its own, fails with a conflict, leaves that intent as it is and writes
// no output.
func TestS3StaleHolderNeverReplacesANewerHoldersIntent(t *testing.T) {
	t.Parallel()
	root := newS3TestRoot(t)
	if _, err := publishWith(t, root, heldLease{}, map[string]string{"data/a.csv": "a1\n"}, fixedNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	sl := &pausingLease{paused: make(chan struct{}), resume: make(chan struct{})}
	staleDone := make(chan error, 1)
	go func() {
		_, err := publishWith(t, root, sl, map[string]string{"data/a.csv": "a2\n", "data/s.csv": "s\n"}, fixedNow.Add(-30*time.Minute))
		staleDone <- err
	}()
	<-sl.paused
	putForeignIntent(t, root)
	close(sl.resume) // the loss not seen yet: only the write's condition stops it
	if err := <-staleDone; !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), "another run's intent") {
		t.Fatalf("stale holder: %v, want a conflict on the intent", err)
	}
	wantForeignIntent(t, root)
	if _, err := root.Stat(context.Background(), "data/s.csv"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("the stale holder wrote an output: %v", err)
	}
}

// TestS3StaleHolderNeverRemovesANewerHoldersIntent: on S3 the intent is
// removed only while it is the version this run wrote (If-Match). A holder
// paused after its commit, before it removes its intent, while another
// holder's intent took its place, leaves that intent where it is, whether
// or not it has seen its lease lost.
func TestS3StaleHolderNeverRemovesANewerHoldersIntent(t *testing.T) {
	t.Parallel()
	for _, lose := range []bool{true, false} {
		t.Run(map[bool]string{true: "lease lost", false: "loss not seen yet"}[lose], func(t *testing.T) {
			t.Parallel()
			root := newS3TestRoot(t)
			if _, err := publishWith(t, root, heldLease{}, map[string]string{"data/a.csv": "a1\n"}, fixedNow.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			stale := &pausedAfterCommit{Backend: root, paused: make(chan struct{}), resume: make(chan struct{})}
			sl := &switchLease{}
			staleDone := make(chan error, 1)
			go func() {
				_, err := publishWith(t, stale, sl, map[string]string{"data/a.csv": "a2\n"}, fixedNow.Add(-30*time.Minute))
				staleDone <- err
			}()
			<-stale.paused
			if lose {
				sl.lose()
			}
			putForeignIntent(t, root)
			close(stale.resume)
			if err := <-staleDone; err != nil {
				t.Logf("stale holder: %v", err)
			}
			wantForeignIntent(t, root)
		})
	}
}
