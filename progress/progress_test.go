package progress

import (
	"context"
	"testing"
)

type rec struct{ calls []any }

func (r *rec) Start(phase string, files, bytes int64) { r.calls = append(r.calls, phase, files, bytes) }
func (r *rec) Add(files, bytes int64)                 { r.calls = append(r.calls, files, bytes) }

func TestReporterInContext(t *testing.T) {
	// Without a reporter nothing happens (and nothing panics).
	Start(context.Background(), "x", 1, 2)
	Add(context.Background(), 1, 2)

	r := &rec{}
	ctx := With(context.Background(), r)
	Start(ctx, "writing", 2, 30)
	Add(ctx, 1, 10)
	want := []any{"writing", int64(2), int64(30), int64(1), int64(10)}
	if len(r.calls) != len(want) {
		t.Fatalf("calls %v, want %v", r.calls, want)
	}
	for i := range want {
		if r.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", r.calls, want)
		}
	}
}
