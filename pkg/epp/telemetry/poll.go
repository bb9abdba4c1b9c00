package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// What the metrics scraper and the model lister share: one loop per endpoint,
// and one bounded GET per poll.

// maxFollowInterval bounds how long a new endpoint waits for its first poll
// when the poll interval is longer (the model list's is seconds).
const maxFollowInterval = time.Second

// defaultClient keeps connections to each server open between polls.
var defaultClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}

// eachEndpoint runs poll for every endpoint of store every interval until ctx
// ends, following the store's endpoint set. Each endpoint has its own loop, so
// one slow server delays only its own polls. what names the polls in errors.
func eachEndpoint(ctx context.Context, store *datastore.Store, what string, interval time.Duration,
	poll func(context.Context, *datastore.EndpointState) error) error {
	if interval <= 0 {
		return fmt.Errorf("%s interval must be positive", what)
	}
	workers := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, cancel := range workers {
			cancel()
		}
		wg.Wait()
	}()
	follow := time.NewTicker(min(interval, maxFollowInterval))
	defer follow.Stop()
	var buf []*datastore.EndpointState
	for {
		buf = store.Endpoints(buf[:0])
		live := make(map[string]bool, len(buf))
		for _, st := range buf {
			key := st.Key()
			live[key] = true
			if _, ok := workers[key]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			workers[key] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(interval)
				defer tick.Stop()
				for {
					// Failures reach the Observe hook; the next poll retries.
					_ = poll(wctx, st)
					select {
					case <-wctx.Done():
						return
					case <-tick.C:
					}
				}
			}()
		}
		for key, cancel := range workers {
			if !live[key] {
				cancel()
				delete(workers, key)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-follow.C:
		}
	}
}

// Poll is what the metrics scraper and the model lister are told alike: which
// endpoints to poll, how often, and how each GET is made and reported.
type Poll struct {
	Store    *datastore.Store
	Interval time.Duration
	// Timeout bounds one poll (the interval when zero).
	Timeout time.Duration
	// Path is the path polled on the endpoint's port (the poller's own when empty).
	Path   string
	Client *http.Client
	// Now is the wall clock (time.Now when nil); only the poller reads it.
	Now func() time.Time
	// Observe, when set, is told the outcome and duration of every poll.
	Observe func(endpoint string, err error, took time.Duration)
	// MaxBodyBytes bounds one answer (the poller's own bound when zero); a
	// longer one is not used.
	MaxBodyBytes int64
}

// run polls every endpoint with once every interval until ctx ends; what
// names the polls in errors.
func (p Poll) run(ctx context.Context, what string, once func(context.Context, *datastore.EndpointState) error) error {
	return eachEndpoint(ctx, p.Store, what, p.Interval, once)
}

// observed runs one poll of endpoint key and tells Observe its outcome and
// duration; start is when it began, by Now.
func (p Poll) observed(key string, poll func(start time.Time) error) error {
	return timed(p.Now, p.Observe, key, poll)
}

// getter is p's GET, with the poller's own path and body bound where p leaves
// them zero, and the interval as the timeout.
func (p Poll) getter(path string, limit int64) getter {
	return getter{client: p.Client, path: p.Path, timeout: p.Timeout, limit: p.MaxBodyBytes}.withDefaults(path, p.Interval, limit)
}

// getter is one endpoint path fetched with a timeout and a body limit.
type getter struct {
	client  *http.Client // defaultClient when nil
	path    string
	timeout time.Duration
	limit   int64
}

// withDefaults fills what the poller's options left zero: the path, the poll
// interval as the timeout, and the body limit.
func (g getter) withDefaults(path string, interval time.Duration, limit int64) getter {
	if g.path == "" {
		g.path = path
	}
	if g.timeout <= 0 {
		g.timeout = interval
	}
	if g.limit <= 0 {
		g.limit = limit
	}
	return g
}

// get fetches the path of endpoint key and hands the body of a 200 answer,
// cut at the limit, to read.
func (g getter) get(ctx context.Context, key string, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+key+g.path, nil)
	if err != nil {
		return err
	}
	client := g.client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s%s: status %d", key, g.path, resp.StatusCode)
	}
	if err := read(io.LimitReader(resp.Body, g.limit)); err != nil {
		return fmt.Errorf("GET %s%s: %w", key, g.path, err)
	}
	return nil
}

// timed runs poll, starting at now(), and tells observe (when set) its outcome and duration.
func timed(now func() time.Time, observe func(endpoint string, err error, took time.Duration), key string,
	poll func(start time.Time) error) error {
	if now == nil {
		now = time.Now
	}
	start := now()
	err := poll(start)
	if observe != nil {
		observe(key, err, now().Sub(start))
	}
	return err
}
