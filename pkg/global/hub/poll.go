package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

// poller fetches one member's summaries every interval (the active check)
// and feeds the picker: one document, or several merged (a member with one
// picker per model); a failure of any of them fails the check, since a
// partial document would take the missing models off the member.
type poller struct {
	member   MemberConfig
	picker   *global.Picker
	client   globalsummary.Client
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time
	sequence uint64
	// reachable is whether the last fetch got an answer (garbage included).
	mu        sync.Mutex
	reachable bool
	fetched   bool
}

func newPoller(m MemberConfig, p *global.Picker, interval, timeout time.Duration, now func() time.Time) (*poller, error) {
	hc := &http.Client{Transport: summaryTransport(nil)}
	if m.CAFile != "" {
		pem, err := os.ReadFile(m.CAFile)
		if err != nil {
			return nil, fmt.Errorf("member %s: caFile: %w", m.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("member %s: caFile %s holds no PEM certificate", m.Name, m.CAFile)
		}
		hc.Transport = summaryTransport(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	return &poller{member: m, picker: p, client: globalsummary.Client{HTTP: hc, TokenFile: m.TokenFile},
		interval: interval, timeout: timeout, now: now}, nil
}

func summaryTransport(tc *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	t.MaxIdleConnsPerHost = 4
	return t
}

// run polls until ctx ends, the first poll at once.
func (p *poller) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll is one active check: every summary fetched within the probe
// timeout, its round trip (smoothed by the picker) the member's RTT.
func (p *poller) poll(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	start := time.Now()
	docs, err := p.fetchAll(ctx)
	rtt := time.Since(start)
	if parent.Err() != nil {
		return // shutting down: no verdict on the member
	}
	var s *globalsummary.Summary
	if err == nil {
		s, err = p.merge(docs)
	}
	now := p.now()
	if err == nil {
		_ = p.picker.UpdateSummary(p.member.Name, s, rtt, now)
		p.setReachable(true) // an invalid document is garbage, from a member that answered
		return
	}
	_ = p.picker.SummaryFailed(p.member.Name, err, now)
	var fe *globalsummary.FetchError
	p.setReachable(errors.As(err, &fe) && fe.Garbage)
}

func (p *poller) setReachable(r bool) {
	p.mu.Lock()
	p.reachable, p.fetched = r, true
	p.mu.Unlock()
}

// state is whether the member answered its last check, and whether it has been checked.
func (p *poller) state() (reachable, fetched bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reachable, p.fetched
}

// fetchAll fetches every summary URL at once; the first failure is the error.
func (p *poller) fetchAll(ctx context.Context) ([]*globalsummary.Summary, error) {
	urls := p.member.SummaryURLs
	if len(urls) == 1 {
		s, err := p.client.Fetch(ctx, urls[0])
		return []*globalsummary.Summary{s}, err
	}
	docs, errs := make([]*globalsummary.Summary, len(urls)), make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { docs[i], errs[i] = p.client.Fetch(ctx, u) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// merge makes one document of the member's; a single one is used as is.
func (p *poller) merge(docs []*globalsummary.Summary) (*globalsummary.Summary, error) {
	if len(docs) == 1 {
		return docs[0], nil
	}
	p.sequence++
	s, err := globalsummary.Merge(p.member.Name, p.member.Region, p.now(), p.sequence, docs...)
	if err != nil {
		return nil, &globalsummary.FetchError{URL: summaryURLsText(p.member), Garbage: true, Err: err}
	}
	return s, nil
}
