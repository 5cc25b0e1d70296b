package events_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/natsserver"
)

// A producer announces a finished bundle. In production js comes from
// nats.Connect(url) and the streams already exist (serve creates them).
// Set the ID yourself so that a retried announce is stored once.
func ExamplePublisher_AnnounceBundle() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "nats")
	defer os.RemoveAll(dir)
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	subjects := events.Subjects{Prefix: "distributor"}
	if _, err := events.Setup(ctx, js, events.SetupConfig{Subjects: subjects}); err != nil {
		log.Fatal(err)
	}

	pub := events.NewPublisher(js, subjects)
	ev := events.BundleReady{
		ID:             events.NewEventID(),
		PipelineID:     "weatherreporter.daily",
		Bundle:         "s3://bundles/weather/2026-06-19/",
		ManifestDigest: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
	}
	seq, dup, err := pub.AnnounceBundle(ctx, ev)
	fmt.Println(seq, dup, err)
	seq, dup, err = pub.AnnounceBundle(ctx, ev) // a retry: deduplicated
	fmt.Println(seq, dup, err)
	fmt.Println(subjects.BundleReady(ev.PipelineID))
	// Output:
	// 1 false <nil>
	// 1 true <nil>
	// distributor.bundle.ready.weatherreporter.daily
}
