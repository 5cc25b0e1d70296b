package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/distributor/distributor/storage"
)

const (
	noWrite  = "distributor cannot write outputs, its catalog or its lock here"
	noRead   = "distributor cannot read its catalog or verify outputs here"
	noList   = "distributor cannot plan (it lists the root) or find leftovers here"
	noDelete = "distributor cannot remove outputs, prune or clean up after itself here"
	noCreate = "two holders could both create the catalog or lock: the fence does not hold"
	noMatch  = "a stale holder could overwrite a newer catalog: the fence does not hold"
	noAtomic = "the storage checks the condition and writes in two steps: the lease still serialises holders, but the catalog's compare-and-swap no longer backs it up"
	noAbort  = "parts of an interrupted large write stay stored (and billed) after distributor aborts the upload; `distributor status` lists them as leftovers"
	noClock  = "lease expiry and the bundle age checks are judged against the wrong time"
)

// basics writes, reads, lists and deletes a scratch object.
func (p *prober) basics(ctx context.Context) []Check {
	obj := p.path("rw")
	data := []byte("distributor doctor\n")
	if _, err := p.b.Put(ctx, obj, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		return []Check{fail("write", true, noWrite, "put %s: %v", obj, err)}
	}
	out := []Check{pass("write", "wrote "+obj)}
	out = append(out, p.readBack(ctx, obj, data))
	var listed bool
	err := p.b.List(ctx, p.dir+"/", func(oi storage.ObjectInfo) error {
		listed = listed || oi.Path == obj
		return nil
	})
	switch {
	case err != nil:
		out = append(out, fail("list", true, noList, "list %s/: %v", p.dir, err))
	case !listed:
		out = append(out, fail("list", true, noList, "list %s/ did not return %s", p.dir, obj))
	default:
		out = append(out, pass("list", "listed "+obj))
	}
	if err := p.b.Delete(ctx, obj); err != nil {
		return append(out, fail("delete", false, noDelete, "delete %s: %v", obj, err))
	}
	if _, err := p.b.Stat(ctx, obj); !errors.Is(err, storage.ErrNotExist) {
		return append(out, fail("delete", false, noDelete, "%s is still there after its delete (%v)", obj, err))
	}
	return append(out, pass("delete", "deleted "+obj))
}

func (p *prober) readBack(ctx context.Context, obj string, data []byte) Check {
	rc, err := p.b.Open(ctx, obj)
	if err != nil {
		return fail("read", true, noRead, "open %s: %v", obj, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	switch {
	case err != nil:
		return fail("read", true, noRead, "read %s: %v", obj, err)
	case !bytes.Equal(got, data):
		return fail("read", true, noRead, "read %d bytes back from %s, wrote %d others", len(got), obj, len(data))
	}
	return pass("read", "read "+obj+" back")
}

// conditions checks that If-None-Match and If-Match are honoured, one
// writer at a time.
func (p *prober) conditions(ctx context.Context) []Check {
	obj := p.path("cas")
	v1, err := p.b.WriteIfVersion(ctx, obj, []byte("1"), "")
	if err != nil {
		return []Check{fail("create_if_absent", true, noCreate, "create %s: %v", obj, err)}
	}
	var out []Check
	switch _, err := p.b.WriteIfVersion(ctx, obj, []byte("again"), ""); {
	case conflict(err):
		out = append(out, pass("create_if_absent", "a second create of "+obj+" was refused"))
	case err == nil:
		out = append(out, fail("create_if_absent", true, noCreate, "a second create of %s succeeded: If-None-Match is ignored", obj))
	default:
		out = append(out, fail("create_if_absent", true, noCreate, "second create of %s: %v", obj, err))
	}
	cur, v, err := p.b.ReadVersion(ctx, obj)
	if err != nil {
		return append(out, fail("if_match", true, noMatch, "read %s: %v", obj, err))
	}
	v2, err := p.b.WriteIfVersion(ctx, obj, append(cur, '2'), v)
	if err != nil {
		return append(out, fail("if_match", true, noMatch, "replace %s at its current version: %v", obj, err))
	}
	switch _, err := p.b.WriteIfVersion(ctx, obj, []byte("stale"), v1); {
	case v1 == v2:
		out = append(out, fail("if_match", true, noMatch, "two versions of %s have one version tag %q", obj, v1))
	case conflict(err):
		out = append(out, pass("if_match", "a replace of "+obj+" at a stale version was refused"))
	case err == nil:
		out = append(out, fail("if_match", true, noMatch, "a replace of %s at a stale version succeeded: If-Match is ignored", obj))
	default:
		out = append(out, fail("if_match", true, noMatch, "replace %s at a stale version: %v", obj, err))
	}
	return out
}

// createRace runs Rounds rounds of Writers creates of one new object at
// once: exactly one must win each round.
func (p *prober) createRace(ctx context.Context) Check {
	w, rounds := p.opts.Writers, p.opts.Rounds
	var bad []string
	for round := range rounds {
		obj := p.path(fmt.Sprintf("create-race-%d", round))
		wins, errs := race(w, func(i int) error {
			_, err := p.b.WriteIfVersion(ctx, obj, fmt.Appendf(nil, "writer %d", i), "")
			return err
		})
		if err := errors.Join(errs...); err != nil {
			return fail("create_race", true, noCreate, "round %d: %v", round+1, err)
		}
		if wins != 1 {
			bad = append(bad, fmt.Sprintf("round %d had %d winners", round+1, wins))
		}
	}
	if len(bad) > 0 {
		return fail("create_race", true, noCreate, "%d writers created one object at once, %d rounds: %s", w, rounds, strings.Join(bad, ", "))
	}
	return pass("create_race", fmt.Sprintf("%d writers created one object at once, %d rounds: one winner each", w, rounds))
}

// updateRace lets Writers writers each add Updates to a counter with
// read, add one, If-Match write (again on a conflict): the count must end
// at Writers×Updates.
func (p *prober) updateRace(ctx context.Context) Check {
	obj := p.path("update-race")
	if _, err := p.b.WriteIfVersion(ctx, obj, []byte("0"), ""); err != nil {
		return fail("update_race", true, noAtomic, "create %s: %v", obj, err)
	}
	w, each := p.opts.Writers, p.opts.Updates
	_, errs := race(w, func(int) error {
		for done := 0; done < each; {
			data, v, err := p.b.ReadVersion(ctx, obj)
			if err != nil {
				return err
			}
			var n int
			if _, err := fmt.Sscanf(string(data), "%d", &n); err != nil {
				return fmt.Errorf("read %q from %s: %w", data, obj, err)
			}
			switch _, err := p.b.WriteIfVersion(ctx, obj, fmt.Appendf(nil, "%d", n+1), v); {
			case err == nil:
				done++
			case !conflict(err):
				return err
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fail("update_race", true, noAtomic, "%v", err)
	}
	data, _, err := p.b.ReadVersion(ctx, obj)
	if err != nil {
		return fail("update_race", true, noAtomic, "read %s: %v", obj, err)
	}
	want := w * each
	var got int
	_, _ = fmt.Sscanf(string(data), "%d", &got)
	if got != want {
		return fail("update_race", true, noAtomic, "%d writers × %d If-Match updates: the count is %d, want %d (%d updates lost)", w, each, got, want, want-got)
	}
	return pass("update_race", fmt.Sprintf("%d writers × %d If-Match updates: none lost", w, each))
}

// race runs fn(0..n-1) at once and counts those that won (nil error);
// a lost condition is no error, anything else is.
func race(n int, fn func(i int) error) (wins int, errs []error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !conflict(err):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return wins, errs
}

func (p *prober) abortedUpload(ctx context.Context, a UploadAborter) Check {
	obj := p.path("multipart")
	if err := a.CheckAbortedUpload(ctx, obj); err != nil {
		return fail("multipart_abort", false, noAbort, "%v", err)
	}
	return pass("multipart_abort", "an aborted multipart upload of "+obj+" left nothing")
}

func (p *prober) clock(ctx context.Context, c ServerClock) Check {
	before := p.opts.Now()
	server, err := c.ServerTime(ctx)
	if err != nil {
		return fail("clock", false, noClock, "read the server's time: %v", err)
	}
	after := p.opts.Now()
	// The Date header has whole seconds: compare with this host's clock
	// at the same resolution.
	local := before.Add(after.Sub(before) / 2).Truncate(time.Second)
	skew := server.Sub(local)
	if skew.Abs() > p.opts.MaxClockSkew+time.Second {
		return fail("clock", false, noClock, "the server's clock is %s from this host's, over max_clock_skew %s", skew.Round(time.Second), p.opts.MaxClockSkew)
	}
	return pass("clock", fmt.Sprintf("the server's clock is %s from this host's (max_clock_skew %s)", skew.Round(time.Second), p.opts.MaxClockSkew))
}
