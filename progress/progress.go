// Package progress carries an optional progress reporter in a context, so
// that long operations (hashing a bundle, writing or verifying outputs) can
// feed a display without knowing about it. Without a reporter every call is
// a no-op.
package progress

import "context"

// Reporter receives progress. Add is called from many goroutines at once.
type Reporter interface {
	// Start begins a phase (e.g. "writing") of files and bytes; -1 means
	// not known in advance.
	Start(phase string, files, bytes int64)

	// Add reports files and bytes done in the current phase.
	Add(files, bytes int64)
}

type key struct{}

// With returns ctx carrying r.
func With(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, key{}, r)
}

// Start begins a phase on ctx's reporter, if any.
func Start(ctx context.Context, phase string, files, bytes int64) {
	if r, ok := ctx.Value(key{}).(Reporter); ok && r != nil {
		r.Start(phase, files, bytes)
	}
}

// Add reports work done to ctx's reporter, if any.
func Add(ctx context.Context, files, bytes int64) {
	if r, ok := ctx.Value(key{}).(Reporter); ok && r != nil {
		r.Add(files, bytes)
	}
}
