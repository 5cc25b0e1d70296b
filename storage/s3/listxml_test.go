package s3_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// List reads the listing pages itself: over more than one page and with
// keys XML must escape, it returns what the SDK's own decoder returns.
func TestListMatchesTheSDKsDecoding(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	odd := []string{"a&b.txt", "lt<gt>.txt", `q"uo'te.txt`, "sp ace/é ü 日本.txt", "per%25cent+plus.txt", "tab\there.txt", "amp;semi.txt"}
	keys := append([]string(nil), odd...)
	for i := range 1003 { // two pages
		keys = append(keys, fmt.Sprintf("d/%04d.txt", i))
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i, k := range keys {
		g.Go(func() error {
			_, err := env.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("root/" + k),
				Body: strings.NewReader(fmt.Sprintf("object %d", i))})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var want []storage.ObjectInfo
	pages := s3.NewListObjectsV2Paginator(env.Client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("root/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if catalog.ValidatePath(aws.ToString(o.Key)[len("root/"):]) != nil {
				continue // List skips what cannot be an output
			}
			want = append(want, storage.ObjectInfo{Path: aws.ToString(o.Key)[len("root/"):], Size: aws.ToInt64(o.Size),
				ModTime: aws.ToTime(o.LastModified), Fingerprint: aws.ToString(o.ETag)})
		}
	}
	if len(want) < len(keys)-1 {
		t.Fatalf("the SDK listed %d valid paths, want at least %d", len(want), len(keys)-1)
	}
	b := newBackend(t, env.Client, bucket, "root", s3store.Options{})
	var mu sync.Mutex
	var got []storage.ObjectInfo
	err := b.List(t.Context(), "", func(o storage.ObjectInfo) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, "List", got, want)

	// ListSplit returns the same, wherever the splits fall: on objects,
	// between them, past the last, or (not increasing) nowhere.
	for name, splits := range map[string][]string{
		"every 300":    {want[299].Path, want[599].Path, want[899].Path},
		"between":      {"d/0100.txt.x", "d/0500.txt.x", "é"},
		"past the end": {"zzz"},
		"one":          {want[500].Path},
		"not sorted":   {want[600].Path, want[300].Path},
		"none":         nil,
	} {
		var got []storage.ObjectInfo
		err := b.ListSplit(t.Context(), splits, func(o storage.ObjectInfo) error { got = append(got, o); return nil })
		if err != nil {
			t.Fatalf("ListSplit %s: %v", name, err)
		}
		sameObjects(t, "ListSplit "+name, got, want)
	}

	// fn's error and the caller's cancellation end it (nothing waits on
	// ranges never started).
	stop := errors.New("stop")
	splits := []string{want[99].Path, want[199].Path, want[299].Path, want[399].Path, want[499].Path, want[599].Path}
	if err := b.ListSplit(t.Context(), splits, func(storage.ObjectInfo) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ListSplit with fn failing: %v, want fn's error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.ListSplit(ctx, splits, func(storage.ObjectInfo) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListSplit cancelled: %v, want context.Canceled", err)
	}

	// One request a range when each holds up to a page.
	counted, reqs := env.CountedBackend(t, bucket, "root")
	splits = []string{want[299].Path, want[599].Path, want[899].Path}
	if err := counted.(*s3store.Backend).ListSplit(t.Context(), splits, func(storage.ObjectInfo) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if l := reqs.Lines(); len(l) != 4 {
		t.Fatalf("ListSplit at 3 splits sent %q, want 4 listings", l)
	}
}

func sameObjects(t *testing.T, what string, got, want []storage.ObjectInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s returned %d objects, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].Path != want[i].Path || got[i].Size != want[i].Size || !got[i].ModTime.Equal(want[i].ModTime) ||
			got[i].Fingerprint != want[i].Fingerprint || got[i].Fingerprint == "" {
			t.Fatalf("%s: object %d = %+v, the SDK = %+v", what, i, got[i], want[i])
		}
	}
}
