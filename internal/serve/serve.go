// Package serve is the one lifecycle of igw's long-running processes (the
// body-based router, the endpoint picker, the standalone gateway): listen on
// every port before anything serves, so that a port in use fails the start;
// serve beside background loops until the context ends or one of them fails;
// then stop, loops first and servers in the order they were added, each given
// a bounded time to let requests in flight finish.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// Group is the servers and background loops of one process. Add servers and
// loops, then Run it once.
type Group struct {
	// Host is the address every port listens on ("" for all interfaces).
	Host string
	// Started, when set, is called once every port is open and served, before
	// Run closes ready: a process reports itself serving there.
	Started func()
	// Stopping, when set, is called once the group stops, after the loops'
	// context ends and before the servers stop: a process reports itself not
	// serving there, so that health checks turn before the ports close.
	Stopping func()

	servers []*server
	loops   []loop

	mu    sync.Mutex
	addrs map[string]string
}

// server is one listener and what serves it.
type server struct {
	name  string
	port  int
	drain time.Duration
	serve func(net.Listener) error
	// stop ends serving, letting requests in flight finish for at most drain.
	stop func(drain time.Duration)
	// wrap, when set, wraps the listener once it is open (a connection cap).
	wrap func(net.Listener) net.Listener
	lis  net.Listener
}

type loop struct {
	name string
	run  func(context.Context) error
}

// GRPC serves srv on port under name (Addr's key and the name in errors). At
// stop, streams in flight get drain to finish before they are cut; 0 cuts them
// at once.
func (g *Group) GRPC(name string, port int, srv *grpc.Server, drain time.Duration) {
	g.servers = append(g.servers, &server{name: name, port: port, drain: drain, serve: srv.Serve,
		stop: func(drain time.Duration) {
			if drain <= 0 {
				srv.Stop()
				return
			}
			stopped := make(chan struct{})
			go func() { srv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(drain):
				srv.Stop()
			}
		}})
}

// HTTP serves srv on port under name. At stop, requests in flight get drain
// to finish before their connections are closed.
func (g *Group) HTTP(name string, port int, srv *http.Server, drain time.Duration) {
	g.servers = append(g.servers, &server{name: name, port: port, drain: drain, serve: srv.Serve,
		stop: func(drain time.Duration) {
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			if srv.Shutdown(ctx) != nil {
				_ = srv.Close()
			}
		}})
}

// WrapListener makes server name serve through wrap(listener), once its
// port is open: a process limits or counts its connections there.
func (g *Group) WrapListener(name string, wrap func(net.Listener) net.Listener) {
	for _, s := range g.servers {
		if s.name == name {
			s.wrap = wrap
		}
	}
}

// Go runs f beside the servers. Its context ends when the group stops; an
// error from f stops the group and is what Run returns.
func (g *Group) Go(name string, f func(context.Context) error) {
	g.loops = append(g.loops, loop{name: name, run: f})
}

// Addr is the address server name listens on once Run has opened it ("" before).
func (g *Group) Addr(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addrs[name]
}

// listen opens every server's port; on a failure it closes those already open.
func (g *Group) listen() error {
	for i, s := range g.servers {
		l, err := net.Listen("tcp", net.JoinHostPort(g.Host, strconv.Itoa(s.port)))
		if err != nil {
			for _, open := range g.servers[:i] {
				open.lis.Close()
			}
			return fmt.Errorf("listen for %s: %w", s.name, err)
		}
		s.lis = l
		if s.wrap != nil {
			s.lis = s.wrap(l)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.addrs == nil {
		g.addrs = map[string]string{}
	}
	for _, s := range g.servers {
		g.addrs[s.name] = s.lis.Addr().String()
	}
	return nil
}

// Run listens, serves until ctx ends or a server or loop fails, then stops
// everything and waits for it. ready, when not nil, is closed once every port
// is open. The error is the first failure; nil when ctx ended the run.
func (g *Group) Run(ctx context.Context, ready chan<- struct{}) error {
	if err := g.listen(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(g.servers)+len(g.loops))
	var wg sync.WaitGroup
	start := func(name string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	for _, s := range g.servers {
		start(s.name+" server", func() error { return s.serve(s.lis) })
	}
	for _, l := range g.loops {
		start(l.name, func() error { return l.run(ctx) })
	}
	if g.Started != nil {
		g.Started()
	}
	if ready != nil {
		close(ready)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	if g.Stopping != nil {
		g.Stopping()
	}
	for _, s := range g.servers {
		s.stop(s.drain)
	}
	wg.Wait()
	return runErr
}
