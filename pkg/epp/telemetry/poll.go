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
