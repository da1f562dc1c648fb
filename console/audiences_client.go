package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The console's client of the audiences service's profile API (docs/audiences.md#profile-api,
// CONSOLE_AUDIENCES_URL, AUDIENCES_TOKEN): member counts and last syncs, profiles and rule
// previews for the audiences pages. The console does not import the audiences package: the
// requests and answers are schemas' (schemas/profiles.go), which the service serves. Every call is short (audiencesTimeout), and once
// the service failed to answer the client does not ask it again for audiencesBackoff, so that
// a page renders at once, with "unavailable", while it is down.

const (
	audiencesTimeout = time.Second
	audiencesBackoff = 5 * time.Second
	// audiencesParallel bounds the calls of one page (one per audience).
	audiencesParallel = 8
)

// errAudiencesDown is the error of a call while the service does not answer.
var errAudiencesDown = errors.New("the audiences service does not answer")

// audiencesClient calls the profile API.
type audiencesClient struct {
	base, token string
	http        *http.Client
	now         func() time.Time

	mu        sync.Mutex
	downUntil time.Time
}

func newAudiencesClient(base, token string) *audiencesClient {
	return &audiencesClient{base: strings.TrimSuffix(base, "/"), token: token, now: time.Now,
		http: &http.Client{Timeout: audiencesTimeout}}
}

// audiencesError is a non-2xx answer of the service: its status and message.
type audiencesError struct {
	Status  int
	Message string
}

func (e *audiencesError) Error() string {
	return fmt.Sprintf("the audiences service answered %d: %s", e.Status, e.Message)
}

// down reports whether the client is backing off after a failure.
func (c *audiencesClient) down() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now().Before(c.downUntil)
}

// call sends a request and decodes a 2xx answer into into; a 404 is an *audiencesError.
func (c *audiencesClient) call(ctx context.Context, method, path string, body []byte, into any) error {
	if c.base == "" || c.down() {
		return errAudiencesDown
	}
	ctx, cancel := context.WithTimeout(ctx, audiencesTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.mu.Lock()
			c.downUntil = c.now().Add(audiencesBackoff)
			c.mu.Unlock()
		}
		return errAudiencesDown
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return errAudiencesDown
	}
	if resp.StatusCode/100 != 2 {
		var e schemas.ProfileAPIError
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return &audiencesError{Status: resp.StatusCode, Message: e.Message}
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("the audiences service's answer to %s %s does not decode: %w", method, path, err)
	}
	return nil
}

// audiences returns the figures of each audience id (absent: not had), asked in parallel.
func (c *audiencesClient) audiences(ctx context.Context, ids []string) (map[string]schemas.AudienceView, error) {
	out := make(map[string]schemas.AudienceView, len(ids))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, audiencesParallel)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var f schemas.AudienceView
			err := c.call(ctx, http.MethodGet, "/v1/audiences/"+url.PathEscape(id), nil, &f)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out[id] = f
		}()
	}
	wg.Wait()
	return out, firstErr
}

// profile returns the profile of a user or anonymous id; nil (and no error) when there is
// none.
func (c *audiencesClient) profile(ctx context.Context, id string) (*schemas.ProfileView, error) {
	var p schemas.ProfileView
	err := c.call(ctx, http.MethodGet, "/v1/profiles/"+url.PathEscape(id), nil, &p)
	var ae *audiencesError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// preview counts the profiles that match rule now.
func (c *audiencesClient) preview(ctx context.Context, rule json.RawMessage) (*schemas.PreviewView, error) {
	body, err := json.Marshal(schemas.PreviewRequest{Rule: rule})
	if err != nil {
		return nil, err
	}
	var p schemas.PreviewView
	if err := c.call(ctx, http.MethodPost, "/v1/audiences/preview", body, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
