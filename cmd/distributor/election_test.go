package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestWaitThroughElection: a follower pulls again after "no responders"
// (a replicated stream electing its leader), however the pull reports it
// (the fetch itself or the batch's error, wrapped or not), and stops on
// any other error or once its context ended.
func TestWaitThroughElection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no responders", ctx, nats.ErrNoResponders, true},
		{"no responders, wrapped", ctx, fmt.Errorf("fetch: %w", nats.ErrNoResponders), true},
		{"another error", ctx, errors.New("permissions violation"), false},
		{"connection closed", ctx, nats.ErrConnectionClosed, false},
		{"no responders after the context ended", ended, nats.ErrNoResponders, false},
	}
	for _, c := range cases {
		if got := waitThroughElection(c.ctx, c.err); got != c.want {
			t.Errorf("%s: waitThroughElection = %v, want %v", c.name, got, c.want)
		}
	}
}
