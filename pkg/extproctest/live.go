package extproctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Live is one exchange played while the HTTP request it belongs to happens, for
// an HTTP front that proxies real traffic through ext_proc servers (a test
// gateway playing Envoy): Begin plays the request path, the front forwards the
// result upstream, and Respond plays the upstream's answer through the server
// as it arrives, writing what the server returns to the client.
type Live struct {
	// Result holds what the request path did: check ImmediateResponse first,
	// then forward RequestHeaders and RequestBody.
	*Result

	cfg    Config
	x      *exchange
	meta   *Request
	cancel context.CancelFunc
	// broken is set when the exchange ended midway (a failed request path or
	// response): Close then resets the stream instead of half-closing it.
	broken bool
}

// Begin plays req's request path (req.Response is ignored) and returns once the
// server has processed it. Close must be called in every case.
func (c *Client) Begin(ctx context.Context, req Request) (*Live, error) {
	ctx, cancel := context.WithCancel(ctx)
	x, err := c.open(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	l := &Live{Result: x.res, cfg: c.cfg, x: x, meta: &req, cancel: cancel}
	p := c.requestPhase(req)
	if err := x.run(p); err != nil {
		l.broken = true
		return l, err
	}
	x.res.RequestHeaders, x.res.RequestBody, x.res.RequestTrailers = p.headers, p.body, p.trailers
	return l, nil
}

// Respond plays the upstream's response through the server: its headers (with
// ":status"), then its body as body delivers it, chunk by chunk in
// FullDuplexStreamed mode (read whole first in Buffered mode). What the server
// returns goes to w as it comes: the headers as mutated, then every body chunk,
// flushed. An immediate response on the response path is written instead.
func (l *Live) Respond(status int, headers Headers, body io.Reader, w http.ResponseWriter) (err error) {
	defer func() { l.broken = l.broken || err != nil }()
	if l.ImmediateResponse != nil {
		return errors.New("extproctest: Respond after an immediate response on the request path")
	}
	h := append(NewHeaders(":status", strconv.Itoa(status)), headers...)
	if l.cfg.ResponseBodyMode == Streamed {
		return l.respondStreamed(h, body, w)
	}
	if l.cfg.ResponseBodyMode == Buffered {
		all, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		p := &phase{dir: responsePath, mode: Buffered, headers: h, chunks: nonEmpty([][]byte{all}, Buffered), metadata: l.meta.MetadataContext}
		if err := l.x.run(p); err != nil {
			return err
		}
		if l.writeImmediate(w) {
			return nil
		}
		writeHeaders(w, p.headers)
		_, err = w.Write(p.body)
		return err
	}
	p := &phase{dir: responsePath, mode: FullDuplexStreamed, headers: h, metadata: l.meta.MetadataContext}
	// As Envoy: the headers, then each body chunk as it arrives, without
	// waiting for replies (sent by the goroutine); the server's replies are
	// written to w as they come.
	first := headersMessage(responsePath, h, false)
	first.MetadataContext = p.metadata
	sendErr := make(chan error, 1)
	go func() { sendErr <- l.sendBody(first, p.metadata, body) }()
	stop := func(err error) error {
		l.cancel() // the sender stops at its next send, or when the upstream body ends
		select {
		case serr := <-sendErr: // the upstream failed first: that is the cause
			if serr != nil {
				return serr
			}
		default:
		}
		return err
	}
	for !p.bodyDone {
		m, err := l.x.recv()
		if err != nil {
			return stop(err)
		}
		wasDone, seen := p.headersDone, len(p.returned)
		if err := l.x.handle(p, m); err != nil {
			return stop(err)
		}
		if l.ImmediateResponse != nil {
			if !wasDone {
				l.writeImmediate(w)
			} // else the headers are out: Envoy resets the stream, the client sees a truncated body
			return stop(nil)
		}
		if p.headersDone && !wasDone {
			p.headers.remove("content-length")
			writeHeaders(w, p.headers)
			flush(w)
		}
		for _, c := range p.returned[seen:] {
			if _, err := w.Write(c.Body); err != nil {
				return stop(err)
			}
			flush(w)
		}
	}
	return <-sendErr
}

// respondStreamed plays a STREAMED response body: Envoy forwards the headers
// once the server has replied to them, then each chunk once the server has
// replied to it, in order. The next chunk goes after the reply to the one
// before, which keeps that order without holding chunks in flight.
func (l *Live) respondStreamed(h Headers, body io.Reader, w http.ResponseWriter) error {
	p := &phase{dir: responsePath, mode: Streamed, headers: h, metadata: l.meta.MetadataContext, stopSending: func() {}}
	send := func(m *extprocv3.ProcessingRequest) error {
		m.MetadataContext = p.metadata
		return l.x.send(m)
	}
	await := func(done func() bool) error {
		for !done() && l.ImmediateResponse == nil {
			m, err := l.x.recv()
			if err != nil {
				return err
			}
			if err := l.x.handle(p, m); err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(headersMessage(responsePath, h, false)); err != nil {
		return err
	}
	if err := await(func() bool { return p.headersDone }); err != nil {
		return err
	}
	if l.writeImmediate(w) {
		return nil
	}
	p.headers.remove("content-length") // the server may change the chunks' sizes
	writeHeaders(w, p.headers)
	flush(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		eos := errors.Is(err, io.EOF)
		if err != nil && !eos {
			return fmt.Errorf("extproctest: reading the upstream body: %w", err)
		}
		if n == 0 && !eos {
			continue
		}
		p.chunks = append(p.chunks, append([]byte(nil), buf[:n]...))
		p.bodyDone = false // more chunks may follow this one
		seen := len(p.returned)
		if err := send(bodyMessage(responsePath, p.chunks[len(p.chunks)-1], eos)); err != nil {
			return err
		}
		if err := await(func() bool { return len(p.returned) > seen }); err != nil {
			return err
		}
		if l.ImmediateResponse != nil {
			return nil // the headers are out: Envoy resets the stream
		}
		if _, err := w.Write(p.returned[seen].Body); err != nil {
			return err
		}
		flush(w)
		if eos {
			return nil
		}
	}
}

// sendBody sends the response headers message first, then body chunk by
// chunk as it is read, the last with end_of_stream.
func (l *Live) sendBody(first *extprocv3.ProcessingRequest, metadata *corev3.Metadata, body io.Reader) error {
	if l.x.send(first) != nil {
		return nil // the receive side reports why the stream broke
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		eos := errors.Is(err, io.EOF)
		if err != nil && !eos {
			l.cancel() // Envoy resets the stream; the receive side stops waiting
			return fmt.Errorf("extproctest: reading the upstream body: %w", err)
		}
		if n > 0 || eos {
			msg := bodyMessage(responsePath, append([]byte(nil), buf[:n]...), eos)
			msg.MetadataContext = metadata
			if l.x.send(msg) != nil {
				return nil
			}
		}
		if eos {
			return nil
		}
	}
}

// Close ends the exchange as Envoy does when the HTTP stream ends: a
// half-close, after which the server must end the stream without another
// message (an error says it did not), or a reset when the exchange failed
// midway.
func (l *Live) Close() error {
	defer l.cancel()
	if l.broken {
		return nil
	}
	return l.x.finish()
}

func (l *Live) writeImmediate(w http.ResponseWriter) bool {
	ir := l.ImmediateResponse
	if ir == nil {
		return false
	}
	writeHeaders(w, append(NewHeaders(":status", strconv.Itoa(ir.Status)), ir.Headers...))
	_, _ = w.Write(ir.Body)
	return true
}

// writeHeaders writes h to w: ":status" becomes the status code, other
// pseudo-headers and hop-by-hop headers are dropped.
func writeHeaders(w http.ResponseWriter, h Headers) {
	status := http.StatusOK
	for _, e := range h {
		switch {
		case e.Key == ":status":
			if n, err := strconv.Atoi(e.Value); err == nil {
				status = n
			}
		case strings.HasPrefix(e.Key, ":"), e.Key == "transfer-encoding", e.Key == "connection":
		default:
			w.Header().Add(e.Key, e.Value)
		}
	}
	w.WriteHeader(status)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
