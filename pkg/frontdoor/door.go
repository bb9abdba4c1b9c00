// Package frontdoor is what every client connection and request meets
// before any routing, in the standalone gateway and the global hub's front.
// Each bound is there so that a slow, large or hostile client costs a
// bounded amount of the process (descriptors, goroutines, memory) and gets
// an OpenAI-style answer rather than a hang, a plain-text error or an OOM.
package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/wire"
)

// retryAfterSeconds is the Retry-After of every answer to a full server:
// caps free up as requests finish, within seconds.
const retryAfterSeconds = 1

// The front door's errors, in the OpenAI shape.
func bodyTimeout(d time.Duration) *apierror.Error {
	return &apierror.Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
		Message: fmt.Sprintf("The request body did not arrive within %v.", d)}
}

func headersTooLarge(limit int) *apierror.Error {
	return &apierror.Error{Status: http.StatusRequestHeaderFieldsTooLarge, Type: "invalid_request_error",
		Code: "request_header_fields_too_large", Message: fmt.Sprintf("Request headers exceed the limit of %d bytes.", limit)}
}

func tooManyRequests(server string, limit int) *apierror.Error {
	return &apierror.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_exceeded", Code: "too_many_concurrent_requests",
		Message: fmt.Sprintf("The %s is serving its limit of %d requests at once; retry shortly.", server, limit), RetryAfterSeconds: retryAfterSeconds}
}

func bufferBudgetFull(server string) *apierror.Error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "buffer_budget_exhausted",
		Message: fmt.Sprintf("The %s is buffering as many request bodies as its memory allows; retry shortly.", server), RetryAfterSeconds: retryAfterSeconds}
}

func tooManyConnections(server string, limit int) *apierror.Error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "too_many_connections",
		Message: fmt.Sprintf("The %s holds its limit of %d connections; retry shortly.", server, limit), RetryAfterSeconds: retryAfterSeconds}
}

// writeClosing sends e and closes the connection after it: the request's
// body, or what is left of it, is not read.
func writeClosing(w http.ResponseWriter, e *apierror.Error) {
	w.Header().Set("Connection", "close")
	e.Write(w)
}

// Door is one server's front door: its bounds, the inference requests in
// flight, the buffered bodies' budget and, once listening, the connection
// cap.
type Door struct {
	opts *Options
	// server names the process in its answers ("gateway", "hub").
	server   string
	inFlight atomic.Int64
	budget   *budget
	conns    atomic.Pointer[connLimiter]
}

// New builds the front door of completed, validated options for server.
func New(o *Options, server string) *Door {
	return &Door{opts: o, server: server, budget: newBudget(o.MaxBufferedBytes)}
}

// Server is an HTTP server for handler, which Guard wraps, with the door's
// header and idle bounds (the body's is Guard's and Enter's).
func (d *Door) Server(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: d.opts.ReadHeaderTimeout, IdleTimeout: d.opts.IdleTimeout,
		// Above the limit, so that Guard answers headers over it with an
		// OpenAI error; net/http's own 431 is plain text.
		MaxHeaderBytes: 2 * d.opts.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Listener caps l's open connections at the door's bound.
func (d *Door) Listener(l net.Listener) net.Listener {
	c := newConnLimiter(l, d.opts.MaxConnections, d.server)
	d.conns.Store(c)
	return c
}

// OpenConnections is the number of client connections open now.
func (d *Door) OpenConnections() int64 {
	if c := d.conns.Load(); c != nil {
		return c.Open()
	}
	return 0
}

// CollectGarbage returns large bodies' memory to the budget until ctx ends
// (a server's loop).
func (d *Door) CollectGarbage(ctx context.Context) error {
	d.budget.collectGarbage(ctx.Done())
	return nil
}

// Buffered is the memory the bodies buffered now take from the budget.
func (d *Door) Buffered() int64 { return d.budget.used.Load() }

// Guard is the front door of every request: headers over the limit get 431;
// the body must arrive within the body-read timeout (readBody lifts the
// deadline once it has the body whole; any other handler keeps it, so that
// net/http's discarding of an unread body is bounded too); an untrusted
// client's reserved headers are removed before anything reads them.
func (d *Door) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > d.opts.MaxHeaderBytes {
			writeClosing(w, headersTooLarge(d.opts.MaxHeaderBytes))
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d.opts.BodyReadTimeout))
		if !d.trusts(r.RemoteAddr) {
			for name := range r.Header {
				if wire.IsReservedHeader(name) {
					delete(r.Header, name)
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// headerBytes is the size of r's request line and headers as sent.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len("  \r\n") + len("Host: \r\n") + len(r.Host)
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(v) + len(": \r\n")
		}
	}
	return n
}

// trusts reports whether the client at remoteAddr may set reserved headers.
func (d *Door) trusts(remoteAddr string) bool {
	if len(d.opts.trusted) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range d.opts.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Enter is an inference request's way in: counted in flight within the
// concurrency cap, its body read whole within the door's bounds. leave
// ends the count and gives the body's memory back, once the body is no
// longer used. When ok is false the client has been answered (429, 408,
// 413, 503, with the connection closed) and nothing is held.
func (d *Door) Enter(w http.ResponseWriter, r *http.Request) (body []byte, leave func(), ok bool) {
	if d.inFlight.Add(1) > int64(d.opts.MaxConcurrentRequests) {
		d.inFlight.Add(-1)
		writeClosing(w, tooManyRequests(d.server, d.opts.MaxConcurrentRequests))
		return nil, nil, false
	}
	body, cost, e := d.readBody(w, r)
	if e != nil {
		d.inFlight.Add(-1)
		writeClosing(w, e)
		return nil, nil, false
	}
	return body, func() {
		d.budget.give(cost)
		d.inFlight.Add(-1)
	}, true
}

// InFlight is the number of inference requests in flight.
func (d *Door) InFlight() int64 { return d.inFlight.Load() }

// budget is the memory every buffered request body may take at once.
type budget struct {
	left atomic.Int64
	used atomic.Int64
	peak atomic.Int64 // the most ever taken at once, for measurements
	// collecting is large bodies' bytes given back but not yet collected;
	// collect wakes collectGarbage for them. returning is those collected
	// whose pages may not yet be back with the system.
	collecting atomic.Int64
	returning  atomic.Int64
	collect    chan struct{}
}

// collectAfter is the cost of a body whose bytes return to the budget only
// once the collector has freed it: left to the collector's pacing, finished
// large bodies stay in memory until the heap doubles, while the budget would
// let as many new ones in beside them.
const collectAfter = 8 << 20

func newBudget(n int64) *budget {
	b := &budget{collect: make(chan struct{}, 1)}
	b.left.Store(n)
	return b
}

// take reserves n bytes; false when fewer are left.
func (b *budget) take(n int64) bool {
	for {
		left := b.left.Load()
		if n > left {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			used := b.used.Add(n)
			for peak := b.peak.Load(); used > peak && !b.peak.CompareAndSwap(peak, used); peak = b.peak.Load() {
			}
			return true
		}
	}
}

// alloc makes a buffer of length and capacity for cost taken from the
// budget; false when it does not fit. A large buffer's cost returns to the
// budget when the collector has freed it and its pages are back with the
// system, not when it is given back: a handler or the transport's writer
// may hold it a moment longer, and until then it is resident memory (a new
// body cannot always reuse the pages of the one before, so freed pages that
// stayed with the process would add to the next body's).
func (b *budget) alloc(cost int64, length, capacity int) ([]byte, bool) {
	if !b.take(cost) {
		return nil, false
	}
	buf := make([]byte, length, capacity)
	if cost >= collectAfter {
		runtime.AddCleanup(&buf[:1][0], b.freed, cost)
	}
	return buf, true
}

// freed counts a collected large buffer's cost as returning: it goes back
// to the budget once collectGarbage has handed its pages to the system.
func (b *budget) freed(n int64) {
	b.collecting.Add(-n)
	b.returning.Add(n)
}

// give hands n bytes back: at once for a small buffer, and for a large one
// (see alloc) by asking for a collection.
func (b *budget) give(n int64) {
	if n < collectAfter {
		b.release(n)
		return
	}
	b.collecting.Add(n)
	select {
	case b.collect <- struct{}{}:
	default: // a collection is pending: it takes these bytes too
	}
}

func (b *budget) release(n int64) {
	b.used.Add(-n)
	b.left.Add(n)
}

// collectGarbage collects the large bodies given back until every one of
// them is freed and its pages returned to the system, one collection for
// all given meanwhile, until done closes. A body may still be referenced
// when it is given back, so collections repeat, further apart each time. A
// collection is cheap here: bodies are byte slices, never scanned.
func (b *budget) collectGarbage(done <-chan struct{}) {
	const firstRetry, lastRetry = time.Millisecond, time.Second
	for {
		select {
		case <-done:
			return
		case <-b.collect:
		}
		for wait := firstRetry; b.collecting.Load() > 0 || b.returning.Load() > 0; wait = min(2*wait, lastRetry) {
			// Cleanups run after the collection that freed their buffers, so
			// what was counted returning before this one is returned by it.
			returned := b.returning.Load()
			debug.FreeOSMemory()
			b.returning.Add(-returned)
			b.release(returned)
			retry := time.NewTimer(wait)
			select {
			case <-done:
				retry.Stop()
				return
			case <-retry.C:
			}
		}
	}
}

// bodyCost is what buffering n body bytes takes from the budget: the body
// and, until the pick, its decoded prompt, which is about as long.
func bodyCost(n int64) int64 { return 2 * n }

// unknownLengthStep is the first buffer of a body of unknown length (chunked);
// it doubles from there, each growth reserved before it is made.
const unknownLengthStep = 64 << 10

// readBody reads r's body whole, within the body-read timeout and the body
// limit, counting it against the buffering budget. cost is what it took
// from the budget, to be given back once the body is no longer used. On an
// error, nothing is held.
func (d *Door) readBody(w http.ResponseWriter, r *http.Request) (body []byte, cost int64, e *apierror.Error) {
	limit := d.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, 0, apierror.TooLarge(limit)
	}
	var err error
	if r.ContentLength >= 0 {
		cost = bodyCost(r.ContentLength)
		var ok bool
		if body, ok = d.budget.alloc(cost, int(r.ContentLength), int(r.ContentLength)); !ok {
			return nil, 0, bufferBudgetFull(d.server)
		}
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, cost, err = d.readUnknownLength(r.Body, limit)
	}
	if err == nil {
		// The body is whole: from now on a read on the connection only waits
		// for the client to leave, which a long stream must not be cut by.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		return body, cost, nil
	}
	d.budget.give(cost)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, errBudget):
		return nil, 0, bufferBudgetFull(d.server)
	case errors.As(err, &tooLarge):
		return nil, 0, apierror.TooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, 0, bodyTimeout(d.opts.BodyReadTimeout)
	}
	return nil, 0, apierror.BadRequest("unreadable_body", "Reading the request body failed: %v", err)
}

var errBudget = errors.New("buffer budget exhausted")

// readUnknownLength reads a body without a Content-Length, reserving each
// larger buffer before it is made; cost is what is reserved when it returns.
func (d *Door) readUnknownLength(body io.Reader, limit int64) (buf []byte, cost int64, err error) {
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == limit {
				// Full at the limit: the body must end here.
				var one [1]byte
				n, rerr := io.ReadFull(body, one[:])
				switch {
				case n > 0:
					return nil, cost, &http.MaxBytesError{Limit: limit}
				case errors.Is(rerr, io.EOF):
					return buf, cost, nil
				}
				return nil, cost, rerr
			}
			size := min(max(2*int64(cap(buf)), unknownLengthStep), limit)
			grown, ok := d.budget.alloc(bodyCost(size), len(buf), int(size))
			if !ok {
				return nil, cost, errBudget
			}
			copy(grown, buf)
			d.budget.give(cost)
			buf, cost = grown, bodyCost(size)
		}
		n, rerr := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(rerr, io.EOF):
			return buf, cost, nil
		case rerr != nil:
			return nil, cost, rerr
		}
	}
}

// connLimiter caps a listener's open connections. A connection beyond the
// cap gets a 503 with Retry-After and is closed, rather than waiting in the
// accept queue or holding a descriptor for a handler.
type connLimiter struct {
	net.Listener
	max  int64
	open atomic.Int64
	// refusing counts connections being answered 503; beyond maxRefusing
	// they are closed without an answer, so refusals are bounded too.
	refusing atomic.Int64
	refusal  []byte
}

const (
	maxRefusing = 1024
	// refuseLinger bounds how long a refused connection is kept so the
	// client can read the 503 before the close.
	refuseLinger = time.Second
)

func newConnLimiter(l net.Listener, max int, server string) *connLimiter {
	body := tooManyConnections(server, max).JSON()
	refusal := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: %d\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", retryAfterSeconds, len(body), body)
	return &connLimiter{Listener: l, max: int64(max), refusal: refusal}
}

// Open is the number of connections open now.
func (l *connLimiter) Open() int64 { return l.open.Load() }

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

func (l *connLimiter) refuse(c net.Conn) {
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseLinger))
		_, _ = c.Write(l.refusal)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		// Reading what the client sends until it closes keeps the kernel
		// from resetting the connection before the answer is read.
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// countedConn gives its slot back once closed.
type countedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// CloseWrite lets net/http half-close the connection after an answer to a
// request whose body it did not read, so the client reads the answer.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
