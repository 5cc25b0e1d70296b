package notify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distributor/distributor/notify"
)

// A webhook attempt carries the result id and the body's signature; a
// receiver that fails is tried again, with the same id, until it accepts.
func TestDeliverWebhookRetriesWithSameID(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "s3cret")
	rcv.fail = 2
	opts := notify.Options{Backoff: 10 * time.Millisecond, LookupEnv: secretEnv("s3cret")}
	ts, err := notify.DestinationTargets(context.Background(), webhookDest("d", rcv, time.Hour), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := published("ev1.d", "d")
	body, _ := r.Encode()
	n, err := notify.Deliver(context.Background(), ts[0], r, body, opts, nil)
	if err != nil || n != 3 {
		t.Fatalf("Deliver = %d attempts, %v; want 3, nil", n, err)
	}
	if rcv.count("ev1.d") != 1 || rcv.badSigns != 0 {
		t.Errorf("calls %v, bad signatures %d", rcv.calls, rcv.badSigns)
	}
}

// A wrong secret fails every attempt; delivery gives up once max_age has
// passed.
func TestDeliverGivesUpAfterMaxAge(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "right")
	opts := notify.Options{Backoff: 20 * time.Millisecond, LookupEnv: secretEnv("wrong")}
	ts, err := notify.DestinationTargets(context.Background(), webhookDest("d", rcv, 200*time.Millisecond), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := published("ev2.d", "d")
	body, _ := r.Encode()
	start := time.Now()
	n, err := notify.Deliver(context.Background(), ts[0], r, body, opts, nil)
	if !errors.Is(err, notify.ErrGaveUp) || n < 2 || time.Since(start) > 2*time.Second {
		t.Fatalf("Deliver = %d attempts, %v after %s; want a give-up after a few attempts", n, err, time.Since(start))
	}
	if rcv.badSigns != n {
		t.Errorf("receiver saw %d bad signatures, want %d", rcv.badSigns, n)
	}
}

// A missing secret variable is one line naming it.
func TestWebhookSecretMissing(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "x")
	_, err := notify.DestinationTargets(context.Background(), webhookDest("d", rcv, time.Hour), notify.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	want := "destination d: notify target webhook: secret_env names HOOK_SECRET, which is not set in the environment: set it to the webhook's secret"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
