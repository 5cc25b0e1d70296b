package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/distributor/distributor/events"
)

// webhook posts the result event as its JSON body.
type webhook struct {
	url    string
	secret []byte // nil: not signed
}

func (w *webhook) send(ctx context.Context, r events.Result, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "distributor")
	req.Header.Set(HeaderEventID, r.ID)
	req.Header.Set(HeaderEventType, r.Type)
	if w.secret != nil {
		req.Header.Set(HeaderSignature, Sign(w.secret, body))
	}
	return do(req)
}

// do sends req; any status but 2xx is an error naming it.
func do(req *http.Request) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s answered %s", req.Method, req.URL.Redacted(), resp.Status)
	}
	return nil
}
