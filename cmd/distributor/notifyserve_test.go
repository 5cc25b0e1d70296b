package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/notify"
	"github.com/distributor/distributor/testenv"
)

// serveProc is a serve binary running as a process of its own.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *testenv.SyncBuffer
	done   chan error
}

// startServeProc starts `bin serve` on cfg with env added to the
// environment and waits until it consumes bundle events.
func startServeProc(t *testing.T, bin, cfg string, env ...string) *serveProc {
	t.Helper()
	p := &serveProc{stderr: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve", "--config", cfg, "--log-format", "json", "--http-addr", "127.0.0.1:0")
	p.cmd.Stderr, p.cmd.Env = p.stderr, append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	testenv.Eventually(t, 15*time.Second, func() bool { return strings.Contains(p.stderr.String(), "consuming bundle-ready events") },
		"serve %d to consume", p.cmd.Process.Pid)
	return p
}

// kill ends the process with SIGKILL, at once, and waits for it.
func (p *serveProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// notifyThroughServeProcesses: two serve processes deliver the published
// results of a destination to its webhook while one is killed with
// SIGKILL halfway through the publications and started again. Every
// published result reaches the receiver with its own id and a valid
// signature; a result arrives twice only when its first call came before
// the kill (the killed process's call whose acknowledgement was lost).
func notifyThroughServeProcesses(t *testing.T, bin string) {
	const nEvents = 20
	e := newNATSEnv(t)
	rcv := newHookReceiver(t, "s3cret")
	e.addWebhook(t, "d3", rcv, "NOTIFY_SERVE_SECRET", "1h")
	env := "NOTIFY_SERVE_SECRET=s3cret"
	procs := []*serveProc{startServeProc(t, bin, e.cfg, env), startServeProc(t, bin, e.cfg, env)}

	ctx := context.Background()
	js := e.nats.JetStream(t)
	subjects := events.Subjects{}
	// The durable starts at the results published after it exists.
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, err := js.Consumer(ctx, subjects.EventsStream(), notify.ConsumerName(subjects, "d3", "hook"))
		return err == nil
	}, "the webhook's durable consumer")
	pub := events.NewPublisher(js, subjects)
	announce := func(i int) {
		dir := filepath.Join(e.dir, "bundles", fmt.Sprint(i))
		digest := testenv.WriteBundle(t, dir, fmt.Sprintf("hook.src%02d", i), time.Now().UTC().Truncate(time.Second),
			map[string]string{fmt.Sprintf("n%02d.txt", i): fmt.Sprintf("bundle %d\n", i)})
		if _, _, err := pub.AnnounceBundle(ctx, events.BundleReady{ID: fmt.Sprintf("hook-%02d", i), PipelineID: "p.two", Bundle: dir, ManifestDigest: digest}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nEvents / 2 {
		announce(i)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { calls, _, _ := rcv.snapshot(); return len(calls) >= 3 }, "the first calls")
	procs[0].kill()
	killed := time.Now()
	for i := nEvents / 2; i < nEvents; i++ {
		announce(i)
	}
	procs = append(procs, startServeProc(t, bin, e.cfg, env))

	var ids []string
	testenv.Eventually(t, 120*time.Second, func() bool {
		if calls, _, _ := rcv.snapshot(); len(calls) < nEvents {
			return false
		}
		ids = publishedIDs(t, e, "d3")
		calls, _, _ := rcv.snapshot()
		for _, id := range ids {
			if calls[id] == 0 {
				return false
			}
		}
		return len(ids) == nEvents
	}, "every published result of d3 at the receiver")
	time.Sleep(2 * time.Second) // a late duplicate would arrive now
	calls, _, bad := rcv.snapshot()
	if bad != 0 {
		t.Errorf("%d calls with a bad signature or id", bad)
	}
	if len(calls) != nEvents {
		t.Errorf("the receiver heard of %d ids, want the %d published: %v", len(calls), nEvents, calls)
	}
	// A result arrives once, once more when the killed process had called
	// (a call it sent before the kill that a loaded receiver may handle
	// seconds later), and once more per attempt a process logged as
	// failed (a call the receiver took but answered after the timeout).
	const handledLate = 5 * time.Second
	failed := failedNotifyAttempts(procs)
	dups := 0
	for _, id := range ids {
		n, first := calls[id], rcv.firstCall(id)
		allowed := 1 + failed[id]
		if first.Before(killed.Add(handledLate)) {
			allowed++
		}
		if n > 1 {
			dups++
		}
		if n > allowed {
			t.Errorf("result %s arrived %d times, first %s after the kill, %d failed attempts logged: a repeat caused by neither the kill nor a failed attempt",
				id, n, first.Sub(killed), failed[id])
		}
	}
	t.Logf("%d results through 2 serve processes, one killed with SIGKILL and restarted: %d delivered twice", nEvents, dups)
}

// failedNotifyAttempts counts per result id the attempts the processes
// logged as failed and retried.
func failedNotifyAttempts(procs []*serveProc) map[string]int {
	failed := map[string]int{}
	for _, p := range procs {
		for line := range strings.Lines(p.stderr.String()) {
			var l struct{ Message, Result string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "notify: delivery failed; retrying" {
				failed[l.Result]++
			}
		}
	}
	return failed
}

// publishedIDs are the ids of the published results of destination d in
// the events stream.
func publishedIDs(t *testing.T, e *natsEnv, d string) []string {
	t.Helper()
	var ids []string
	for _, r := range e.tailJSON(t, "--type", "published", "--destination", d) {
		ids = append(ids, r.ID)
	}
	return ids
}
