package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// intentCapture is a local root killed as it rewrites its intent in place:
// it keeps the bytes it was given and writes none.
type intentCapture struct {
	*local.Backend
	data []byte
}

func (c *intentCapture) hookWriteIntent(_ context.Context, data []byte) (storage.Version, error) {
	c.data = bytes.Clone(data)
	return "", errKilled
}

// plainRoot is a root whose intents are written whole (as on S3).
type plainRoot struct{ storage.Backend }

func (plainRoot) Properties() storage.Properties { return storage.Properties{} }

var tornNext = map[string]string{"data/a.csv": "a2\n", "data/c.csv": "c\n"}

// TestTornIntentIsIgnored: a crash in the middle of an intent's in-place
// rewrite leaves any mix of its bytes, or zeros, and no output of it named
// (outputs are named only once the rewrite's flush returned). The next run
// recognises the torn copy by its checksum, rolls nothing forward and ends
// exactly where an uninterrupted run ends.
func TestTornIntentIsIgnored(t *testing.T) {
	t.Parallel()
	want := tornNextReference(t)
	// The intent of the second publication, as it was about to be written.
	lb, _ := local.New(publishedDropFiles(t))
	capture := &intentCapture{Backend: lb}
	if _, err := publish(t, capture, planner.Replacement, tornNext, fixedNow); err == nil || len(capture.data) < 100 {
		t.Fatalf("killed at the intent: %v, %d bytes captured", err, len(capture.data))
	}
	whole := capture.data
	flipped := bytes.Clone(whole)
	flipped[len(flipped)-3] ^= 1
	for name, torn := range map[string][]byte{
		"one byte":           whole[:1],
		"half":               whole[:len(whole)/2],
		"all but one byte":   whole[:len(whole)-1],
		"one byte changed":   flipped,
		"zeros":              make([]byte, len(whole)),
		"head of the intent": append(bytes.Clone(whole[:80]), make([]byte, len(whole)-80)...),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := publishedDropFiles(t)
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), torn, 0o644); err != nil {
				t.Fatal(err)
			}
			b, _ := local.New(root)
			res, err := publish(t, b, planner.Replacement, tornNext, fixedNow)
			if err != nil {
				t.Fatalf("publication after a torn intent: %v", err)
			}
			if res.Recovered {
				t.Fatal("a torn intent was recovered (rolled forward)")
			}
			if d := diff(snapshot(t, root), want); d != "" {
				t.Fatalf("after a torn intent the publication ends elsewhere:\n%s", d)
			}
			if intentPending(t, root) {
				t.Fatal("intent left behind")
			}
		})
	}
	// Where intents are written whole (never torn), a checksum that does
	// not match is damage: refused, as any unreadable intent.
	t.Run("written whole", func(t *testing.T) {
		t.Parallel()
		root := publishedDropFiles(t)
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(engine.IntentPath)), flipped, 0o644); err != nil {
			t.Fatal(err)
		}
		b, _ := local.New(root)
		_, err := publish(t, plainRoot{b}, planner.Replacement, tornNext, fixedNow)
		if err == nil || !strings.Contains(err.Error(), "torn intent .distributor/intent.json: not a whole intent (its checksum does not match): remove it after checking the root") {
			t.Fatalf("publication over a damaged intent: %v, want it refused", err)
		}
	})
}

// publishedDropFiles is a local root holding dropFiles, published an hour
// before fixedNow.
func publishedDropFiles(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	b, _ := local.New(root)
	if _, err := publish(t, b, planner.Replacement, dropFiles, fixedNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return root
}

// tornNextReference is where an uninterrupted publication of tornNext over
// publishedDropFiles ends: the state every interrupted one must reach.
func tornNextReference(t *testing.T) map[string]string {
	t.Helper()
	ref := publishedDropFiles(t)
	rb, _ := local.New(ref)
	if _, err := publish(t, rb, planner.Replacement, tornNext, fixedNow); err != nil {
		t.Fatal(err)
	}
	return snapshot(t, ref)
}

// Dispatch of the contract's calls to the hooks above.

func (c *intentCapture) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, opts ...storage.Option) (storage.Version, error) {
	if p == engine.IntentPath && storage.HasOption(opts, storage.InPlace) {
		return c.hookWriteIntent(ctx, data)
	}
	return c.Backend.WriteIfVersion(ctx, p, data, want, opts...)
}
