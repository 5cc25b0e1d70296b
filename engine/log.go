package engine

import (
	"context"

	"github.com/rs/zerolog"
)

type logKey struct{}

// WithLog returns ctx carrying l. The service logs each destination with
// it (adding the lease token once held), so that a caller's fields, such
// as the event a publication belongs to, are on every line the
// publication logs.
func WithLog(ctx context.Context, l zerolog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

// LogFrom returns the logger WithLog put in ctx, or fallback.
func LogFrom(ctx context.Context, fallback zerolog.Logger) zerolog.Logger {
	if l, ok := ctx.Value(logKey{}).(zerolog.Logger); ok {
		return l
	}
	return fallback
}
