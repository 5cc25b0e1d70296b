package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// The reader test's scale. The full shape is a site of 1,000 files, 100
// publications through two serve processes of 8 workers, 20 of them
// killed, and readers at 200 read-sets a second; here the same site
// shape is smaller so that local and S3 each run in a few seconds: 161
// files (index.html naming 50 content-hashed assets, new names each
// version, and 10 fixed-name stylesheets, plus 100 other files; each
// output visible a millisecond after its commit began), 24
// publications alternating between two engines of 8 workers, a third of
// them killed at a random storage call and finished by the other engine,
// 4 readers each starting a read-set every millisecond or so,
// retain_previous 2s.
const (
	readerVersions  = 24
	readerHashed    = 50
	readerFixed     = 10
	readerOther     = 100
	readerReaders   = 4
	readerRetain    = 2 * time.Second
	readerMinReads  = 100
	readerKillEvery = 3
)

// readerSite is version v of the site.
func readerSite(v int) map[string]string {
	files := map[string]string{}
	var names []string
	for i := range readerHashed {
		name := fmt.Sprintf("js/a%02d.%s.js", i, digestOfString(fmt.Sprint(v, "/", i))[7:19])
		files[name] = fmt.Sprintf("v%d asset %d", v, i)
		names = append(names, name)
	}
	for i := range readerFixed {
		name := fmt.Sprintf("static/s%02d.css", i)
		files[name] = fmt.Sprintf("v%d", v)
		names = append(names, name)
	}
	for i := range readerOther {
		files[fmt.Sprintf("data/%02d/f%03d.txt", i%10, i)] = fmt.Sprintf("v%d other %d", v, i)
	}
	files["index.html"] = fmt.Sprintf("v%d\n%s\n", v, strings.Join(names, "\n"))
	return files
}

var readerVersion = regexp.MustCompile(`^v(\d+)`)

// readerLog is what the publisher tells the readers: when the first
// attempt of each version began (no version replaced an older one
// before that).
type readerLog struct {
	mu      sync.Mutex
	started map[int]time.Time
}

func (l *readerLog) start(v int) {
	l.mu.Lock()
	l.started[v] = time.Now()
	l.mu.Unlock()
}

// replacedSince returns how long ago the version after v began to
// replace it (false: not yet).
func (l *readerLog) replacedSince(v int) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.started[v+1]
	return time.Since(t), ok
}

// TestReadersNeverSeeABrokenVersion publishes version after version of a
// site while readers read index.html and then every asset it names. With
// publish_last ["**/*.css", "index.html"] and retain_previous, no reader
// finds a hashed asset of the index's version missing while that
// version was replaced less than retain_previous ago, nor a fixed-name
// stylesheet older than the index it read (group 1 before group 2);
// publications are killed mid-way and finished by the other engine; in
// the end the root holds the newest version, verify is clean, and one
// sweep after retain_previous leaves no retired path. Local and S3.
func TestReadersNeverSeeABrokenVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		root, _ := newRoot(t)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		log := &readerLog{started: map[int]time.Time{}}
		var reads, broken atomic.Int64
		var firstBroken atomic.Value
		var wg sync.WaitGroup
		for range readerReaders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					switch msg := readSet(ctx, root, log); {
					case msg == "":
						reads.Add(1)
					case msg != "none" && ctx.Err() == nil:
						broken.Add(1)
						firstBroken.CompareAndSwap(nil, msg)
					}
					time.Sleep(time.Millisecond) // the CPU is shared with the publications
				}
			}()
		}
		publishVersions(t, slowCommits{root}, log)
		for reads.Load() < readerMinReads && !t.Failed() {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		wg.Wait()
		if n := broken.Load(); n > 0 {
			t.Fatalf("%d of %d read-sets saw a broken version; the first: %s", n, reads.Load()+n, firstBroken.Load())
		}
		t.Logf("%d read-sets, none broken", reads.Load())
		checkEndState(t, root)
	})
}

// publishVersions publishes versions 1..readerVersions, alternating
// between two engines; every readerKillEvery-th attempt is killed at a
// random storage call and the other engine publishes the same event.
func publishVersions(t *testing.T, root storage.Backend, log *readerLog) {
	t.Helper()
	engines := []*engine.Engine{{Version: "test", Workers: 8}, {Version: "test", Workers: 8}}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for v := 1; v <= readerVersions; v++ {
		pub := generated(readerSite(v), v, base.Add(time.Duration(v)*time.Second), planner.Replacement)
		pub.PublishLast, pub.RetainPrevious = []string{"**/*.css", "index.html"}, readerRetain
		log.start(v)
		e := engines[v%2]
		if v%readerKillEvery == 0 {
			// Staging and naming each output are a call each: a kill
			// anywhere from the first staged write to the sweep.
			dying := &dyingBackend{Backend: root, killAt: 1 + rand.IntN(2*len(pub.Outputs)+10)}
			if _, err := e.Publish(context.Background(), dying, heldLease{}, pub); err != nil && !errors.Is(err, errKilled) {
				t.Fatalf("version %d, killed at call %d: %v", v, dying.killAt, err)
			}
			e = engines[(v+1)%2]
		}
		if _, err := e.Publish(context.Background(), root, heldLease{}, pub); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
}

// slowCommits makes each output visible a millisecond after it is asked
// to (a staged commit), as a busy store does: without ordered groups
// readers then meet the window between the index and what it names (the
// index sorts before the hashed assets and the stylesheets).
type slowCommits struct{ storage.Backend }

func (s slowCommits) Stage(ctx context.Context) storage.Stage {
	return hookedStage(s.Backend.Stage(ctx), func(ctx context.Context, p string, commit func() (storage.ObjectInfo, error)) (storage.ObjectInfo, error) {
		time.Sleep(time.Millisecond)
		return commit()
	})
}

// readSet reads index.html and every asset it names, and says what is
// broken, if anything ("none": there is no index.html yet).
func readSet(ctx context.Context, root storage.Backend, log *readerLog) string {
	index, err := readAll(ctx, root, "index.html")
	if errors.Is(err, storage.ErrNotExist) {
		return "none" // before the first version
	}
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(index), "\n")
	m := readerVersion.FindStringSubmatch(lines[0])
	if m == nil {
		return fmt.Sprintf("index.html is not a whole version: %q", index)
	}
	v, _ := strconv.Atoi(m[1])
	for _, name := range lines[1:] {
		data, err := readAll(ctx, root, name)
		switch {
		case errors.Is(err, storage.ErrNotExist) && strings.HasPrefix(name, "js/"):
			since, replaced := log.replacedSince(v)
			if !replaced {
				return fmt.Sprintf("index.html of v%d names %s, missing (v%d is the newest)", v, name, v)
			}
			if since < readerRetain {
				return fmt.Sprintf("index.html of v%d names %s, missing %s after v%d began to replace it", v, name, since, v+1)
			}
		case err != nil:
			return fmt.Sprintf("read %s (index.html of v%d): %v", name, v, err)
		case strings.HasPrefix(name, "static/"):
			if got, _ := strconv.Atoi(strings.TrimPrefix(data, "v")); got < v {
				return fmt.Sprintf("index.html of v%d, but %s of v%d: group 2 visible before group 1", v, name, got)
			}
		case !strings.HasPrefix(data, fmt.Sprintf("v%d ", v)):
			return fmt.Sprintf("index.html of v%d names %s, which holds %q", v, name, data)
		}
	}
	return ""
}

func readAll(ctx context.Context, root storage.Backend, p string) (string, error) {
	r, err := root.Open(ctx, p)
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return string(data), err
}

// checkEndState: the newest version, verify clean, and after
// retain_previous one sweep leaves no retired path.
func checkEndState(t *testing.T, root storage.Backend) {
	t.Helper()
	ctx := context.Background()
	e := &engine.Engine{Version: "test"}
	rep, err := e.Verify(ctx, root, func(catalog.Output) bool { return true })
	if err != nil || len(rep.Missing)+len(rep.Damaged)+len(rep.InFlight) > 0 || rep.PendingRecovery {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	time.Sleep(readerRetain + time.Second) // due times are whole seconds
	if _, err := e.SweepRetired(ctx, root, heldLease{}); err != nil {
		t.Fatal(err)
	}
	if got := retiredPaths(t, root); got != nil {
		t.Fatalf("retired paths left after a sweep past retain_previous: %q", got)
	}
	wantContents(t, root, readerSite(readerVersions))
}
