package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/storage"
)

// hookStores calls after once, after the first output (not distributor's
// own state) is written to a destination.
type hookStores struct {
	engine.Stores
	once  sync.Once
	after func()
}

func (h *hookStores) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	b, err := h.Stores.Destination(ctx, d)
	if err != nil {
		return nil, err
	}
	return &hookBackend{Backend: b, h: h}, nil
}

type hookBackend struct {
	storage.Backend
	h *hookStores
}

func (b *hookBackend) Put(ctx context.Context, p string, r io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := b.Backend.Put(ctx, p, r, size, opts)
	if err == nil && !strings.HasPrefix(p, ".distributor") {
		b.h.once.Do(b.h.after)
	}
	return oi, err
}

// TestDirectApplyOutlivesNATS: an apply that found NATS holds its KV lease
// and the root's lock object. When NATS goes away after the first output is
// written, the KV lease can no longer be renewed, but the lock object still
// fences the root: the run finishes, commits its catalog and exits 0.
func TestDirectApplyOutlivesNATS(t *testing.T) {
	e := newNATSEnv(t)
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	b := e.makeBundle(t, "b", "src.two", files)

	const ttl = time.Second // the smallest KV lease TTL
	var out, errb lockedBuffer
	a := newApp(&out, &errb)
	a.leaseTTL = ttl
	a.wrapStores = func(s engine.Stores) engine.Stores {
		return &hookStores{Stores: s, after: func() {
			e.nats.Server.Shutdown()
			// Past the KV lease's safety margin: before, the run failed
			// here with "lease lost" after writing everything.
			time.Sleep(ttl + ttl/2)
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	code := a.run(ctx, []string{"apply", "--pipeline", "p.two", "--bundle", b, "--config", e.cfg})
	if code != 0 {
		t.Fatalf("apply with NATS gone mid-run: exit %d\n%s%s", code, out.String(), errb.String())
	}
	t.Logf("apply took %v\n%s%s", time.Since(start).Round(time.Millisecond), out.String(), errb.String())

	root := e.roots["d3"]
	want := slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	})
	if got := catalogPaths(t, root); !slices.Equal(got, want) {
		t.Fatalf("catalog after the run: %v, want %v", got, want)
	}
	for p, content := range files {
		if got := readFile(t, filepath.Join(root, p)); got != content {
			t.Errorf("%s = %q, want %q", p, got, content)
		}
	}
	// The lock object was released.
	if _, err := os.Stat(filepath.Join(root, ".distributor", "lock")); !os.IsNotExist(err) {
		t.Errorf("lock object after the run: %v, want none", err)
	}
}
