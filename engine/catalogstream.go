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

// eachCatalogRecord calls fn with each record of root's catalog in path
// order, holding one at a time (catalog.Scan over Backend.Open): a
// catalog of a million records is never held whole. A catalog Scan does
// not stream (another form than Marshal's, legacy state, an invalid one)
// is read whole by readState, whose answer is the reference: restart is
// called first, since fn is then given every record again. No catalog:
// no record and present false. fn's error ends the read and is returned.
func eachCatalogRecord(ctx context.Context, root storage.Backend, restart func(), fn func(*catalog.Record) error) (streamedHead, error) {
	r, err := root.Open(ctx, catalog.FileName)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		return streamedHead{}, nil
	case err != nil:
		return streamedHead{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	var fnErr error
	h, err := catalog.Scan(r, func(rec *catalog.Record) error {
		fnErr = fn(rec)
		return fnErr
	})
	r.Close()
	switch {
	case err == nil:
		return streamedHead{present: true, updatedAt: h.UpdatedAt}, nil
	case fnErr != nil:
		return streamedHead{}, fnErr
	case !errors.Is(err, catalog.ErrNotStreamed):
		return streamedHead{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	restart()
	st, err := readState(ctx, root)
	if err != nil {
		return streamedHead{}, err
	}
	head := streamedHead{present: st.version != "", legacy: st.legacy}
	if st.cat == nil {
		return head, nil
	}
	head.updatedAt = st.cat.UpdatedAt
	var rec catalog.Record
	for i := range st.cat.Outputs {
		rec.Output = st.cat.Outputs[i]
		if err := fn(&rec); err != nil {
			return streamedHead{}, err
		}
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
