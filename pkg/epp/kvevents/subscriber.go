package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/go-zeromq/zmq4"
)

// subscriber follows one pod: a SUB socket on its events port and a DEALER
// on its replay port (vLLM's ROUTER), driving the pod's stream. It
// reconnects with back-off for as long as the pod is known.
type subscriber struct {
	host   string
	st     *stream
	cfg    StreamConfig
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// endpoint is tcp://host:port.
func endpoint(host string, port int) string {
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port))
}

func startSubscriber(ctx context.Context, host string, st *stream, cfg StreamConfig, lg *slog.Logger) *subscriber {
	ctx, cancel := context.WithCancel(ctx)
	s := &subscriber{host: host, st: st, cfg: cfg, log: lg, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

func (s *subscriber) stop() {
	s.cancel()
	<-s.done
}

// quiet silences the ZMQ library's logs; the stream's state says what matters.
var quiet = log.New(io.Discard, "", 0)

func (s *subscriber) run(ctx context.Context) {
	defer close(s.done)
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		s.st.disconnected(err.Error(), time.Now())
		if time.Since(start) > 10*time.Second {
			backoff = 250 * time.Millisecond // a session that lasted resets the back-off
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

type received struct {
	msg zmq4.Msg
	err error
}

// session connects, then feeds the stream until a socket fails or the pod
// stops answering.
func (s *subscriber) session(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []zmq4.Option{zmq4.WithLogger(quiet), zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(time.Second)}
	sub := zmq4.NewSub(ctx, opts...)
	defer sub.Close()
	pubAddr := endpoint(s.host, s.cfg.EventsPort)
	if err := sub.Dial(pubAddr); err != nil {
		return fmt.Errorf("cannot connect to %s: %v", pubAddr, err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, s.cfg.Topic); err != nil {
		return fmt.Errorf("subscribing to %s: %v", pubAddr, err)
	}
	var dealer zmq4.Socket
	if s.cfg.ReplayPort != 0 {
		dealer = zmq4.NewDealer(ctx, opts...)
		defer dealer.Close()
		replayAddr := endpoint(s.host, s.cfg.ReplayPort)
		if err := dealer.Dial(replayAddr); err != nil {
			return fmt.Errorf("cannot connect to the replay socket %s: %v", replayAddr, err)
		}
	}
	live, replies := make(chan received, 64), make(chan received, 64)
	pump := func(sock zmq4.Socket, out chan<- received) {
		for {
			msg, err := sock.Recv()
			select {
			case out <- received{msg, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}
	go pump(sub, live)
	if dealer != nil {
		go pump(dealer, replies)
	}
	askReplay := func(from uint64) error {
		err := dealer.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, from)))
		if err != nil {
			return fmt.Errorf("replay request to %s: %v", endpoint(s.host, s.cfg.ReplayPort), err)
		}
		return nil
	}
	if from, ask := s.st.connected(time.Now()); ask {
		if err := askReplay(from); err != nil {
			return err
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var from uint64
		var ask bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-live:
			if r.err != nil {
				return fmt.Errorf("event stream from %s ended: %v", pubAddr, r.err)
			}
			m, ok := liveMessage(r.msg)
			if !ok {
				continue // not vLLM's three frames: nothing to apply, and no sequence to follow
			}
			from, ask = s.st.live(m, time.Now())
		case r := <-replies:
			if r.err != nil {
				return fmt.Errorf("replay socket %s: %v", endpoint(s.host, s.cfg.ReplayPort), r.err)
			}
			m, end, ok := replayMessage(r.msg)
			switch {
			case !ok:
				continue
			case end:
				from, ask = s.st.replayEnd(time.Now())
			default:
				s.st.replayBatch(m)
			}
		case now := <-tick.C:
			var drop bool
			from, ask, drop = s.st.tick(now)
			if drop {
				return fmt.Errorf("no answer from %s", endpoint(s.host, s.cfg.ReplayPort))
			}
		}
		if ask {
			if err := askReplay(from); err != nil {
				return err
			}
		}
	}
}

// liveMessage reads [topic, sequence, payload].
func liveMessage(msg zmq4.Msg) (message, bool) {
	if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
		return message{}, false
	}
	return message{seq: binary.BigEndian.Uint64(msg.Frames[1]), payload: msg.Frames[2]}, true
}

// replayMessage reads a replay reply: [empty, sequence, payload], sequence -1
// ending it.
func replayMessage(msg zmq4.Msg) (m message, end, ok bool) {
	f := msg.Frames
	if len(f) == 3 && len(f[0]) == 0 {
		f = f[1:] // the envelope delimiter
	}
	if len(f) != 2 || len(f[0]) != 8 {
		return message{}, false, false
	}
	seq := binary.BigEndian.Uint64(f[0])
	if seq == ^uint64(0) {
		return message{}, true, true
	}
	return message{seq: seq, payload: f[1]}, false, true
}
