package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// streamedHead is what a streamed read tells of a root's catalog beside
// its records.
type streamedHead struct {
	// present: the root has a catalog; legacy: it is superseded legacy
	// state (no records).
	present, legacy bool
	updatedAt       time.Time
}

// streamCatalog reads root's catalog with scan (catalog.Scan or
// catalog.ScanTally, giving its records one at a time) over Backend.Open:
// a catalog of a million records is never held whole. A catalog scan does
// not stream (another form than Marshal's, legacy state, an invalid one)
// is read whole by readState, whose answer is the reference: whole is
// then given its records, and the caller drops what scan gave it. No
// catalog: neither is called, and present is false.
func streamCatalog(ctx context.Context, root storage.Backend, scan func(io.Reader) (catalog.Head, error), whole func([]catalog.Output)) (streamedHead, error) {
	r, err := root.Open(ctx, catalog.FileName)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		return streamedHead{}, nil
	case err != nil:
		return streamedHead{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	h, err := scan(r)
	r.Close()
	switch {
	case err == nil:
		return streamedHead{present: true, updatedAt: h.UpdatedAt}, nil
	case !errors.Is(err, catalog.ErrNotStreamed):
		return streamedHead{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	st, err := readState(ctx, root)
	if err != nil {
		return streamedHead{}, err
	}
	head := streamedHead{present: st.version != "", legacy: st.legacy}
	if st.cat != nil {
		head.updatedAt = st.cat.UpdatedAt
		whole(st.cat.Outputs)
	}
	return head, nil
}

// catalogMark identifies the stored version of root's catalog without
// holding it ("" when there is none): its fingerprint, which a replaced
// catalog changes (every catalog is written anew, never rewritten in
// place), or, where the backend cannot tell one, the sha256 of its bytes
// read as a stream.
func catalogMark(ctx context.Context, root storage.Backend) (storage.Version, error) {
	fi, err := root.Stat(ctx, catalog.FileName)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("stat %s in %s: %w", catalog.FileName, root, err)
	case fi.Fingerprint != "":
		return storage.Version("fingerprint:" + fi.Fingerprint), nil
	}
	r, err := root.Open(ctx, catalog.FileName)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	return storage.Version("sha256:" + fmt.Sprintf("%x", h.Sum(nil))), nil
}
