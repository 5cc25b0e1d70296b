package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/distributor/distributor/events"
)

// A roll back through serve while no serve runs stays queued on the admin
// subject: rollback's timeout line says so and names the command to check,
// and a serve that starts later applies it.
func TestRollbackWithoutServeSaysItIsQueued(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	s := startServe(t, e.cfg)
	b1 := e.makeBundle(t, "b1", "src.one", bundleOne)
	code, stdout, stderr := e.cmd(t, "publish", "--wait", "--pipeline", "p.one", "--bundle", b1)
	if code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", code, stdout, stderr)
	}
	orig := announcedID(t, stdout)
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}

	code, stdout, stderr = e.cmd(t, "rollback", "--destination", "d1", "--to", orig+".d1", "--timeout", "300ms")
	sm := regexp.MustCompile(`announced (\S+) on the admin subject`).FindStringSubmatch(stdout)
	if sm == nil {
		t.Fatalf("rollback without serve: no announced line in %q (stderr %q)", stdout, stderr)
	}
	m := sm[1]
	want := "distributor: no serve answered within 300ms; the roll back " + m + " stays queued on the admin subject and runs when a serve processes it: check with `distributor history --destination d1`\n"
	if code != exitFailed || stderr != want {
		t.Fatalf("rollback without serve: exit %d, stderr\n%q\nwant exit %d and\n%q", code, stderr, exitFailed, want)
	}

	startServe(t, e.cfg)
	r := e.waitEvent(t, func(r events.Result) bool { return r.BundleEventID == m }, "--destination", "d1")
	if r.Type != events.TypePublished || !strings.HasPrefix(r.RollbackOf, orig) {
		t.Fatalf("queued roll back once serve returned: %+v", r)
	}
}
