package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/igw-dev/igw/pkg/epp/kvevents"
)

// EncodeKVEventBatch appends vLLM's msgpack encoding of one KVEventBatch to
// dst: msgspec array-like structs, so the batch is [ts, [events...],
// data_parallel_rank] and each event [tag, fields...] with vLLM's field order
// (BlockStored: block_hashes, parent_block_hash, token_ids, block_size,
// lora_id, medium, lora_name; BlockRemoved: block_hashes, medium). Hashes are
// 64-bit integers when intHashes, else the 32-byte digests.
func EncodeKVEventBatch(dst []byte, ts float64, events []KVEvent, intHashes bool) []byte {
	buf := bytes.NewBuffer(dst)
	enc := msgpack.NewEncoder(buf)
	// Writing to a bytes.Buffer cannot fail: the errors below are always nil.
	_ = enc.EncodeArrayLen(3)
	_ = enc.EncodeFloat64(ts)
	_ = enc.EncodeArrayLen(len(events))
	hash := func(h BlockHash) {
		if intHashes {
			_ = enc.EncodeUint(h.Int())
		} else {
			_ = enc.EncodeBytes(h[:])
		}
	}
	hashes := func(hs []BlockHash) {
		_ = enc.EncodeArrayLen(len(hs))
		for _, h := range hs {
			hash(h)
		}
	}
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case kvevents.BlockStored:
			_ = enc.EncodeArrayLen(8)
			_ = enc.EncodeString(ev.Kind.String())
			hashes(ev.BlockHashes)
			if ev.HasParent {
				hash(ev.Parent)
			} else {
				_ = enc.EncodeNil()
			}
			_ = enc.EncodeArrayLen(len(ev.TokenIDs))
			for _, t := range ev.TokenIDs {
				_ = enc.EncodeUint(uint64(t))
			}
			_ = enc.EncodeUint(BlockSize)
			if ev.LoRAID != 0 {
				_ = enc.EncodeUint(uint64(ev.LoRAID))
			} else {
				_ = enc.EncodeNil()
			}
			_ = enc.EncodeString("GPU")
			if ev.LoRAName != "" {
				_ = enc.EncodeString(ev.LoRAName)
			} else {
				_ = enc.EncodeNil()
			}
		case kvevents.BlockRemoved:
			_ = enc.EncodeArrayLen(3)
			_ = enc.EncodeString(ev.Kind.String())
			hashes(ev.BlockHashes)
			_ = enc.EncodeString("GPU")
		case kvevents.AllBlocksCleared:
			_ = enc.EncodeArrayLen(1)
			_ = enc.EncodeString(ev.Kind.String())
		}
	}
	_ = enc.EncodeUint(0) // data_parallel_rank
	return buf.Bytes()
}

// KVEventPublisher is vLLM's ZmqEventPublisher: each batch goes out on a PUB
// socket as [topic, 8-byte big-endian sequence, msgpack batch], and a ROUTER
// socket resends buffered batches to a subscriber that asks for them with
// [empty, 8-byte start sequence], ending the reply with sequence -1.
type KVEventPublisher struct {
	cfg KVEventsConfig
	// Endpoint and ReplayEndpoint are the addresses bound (the port chosen for
	// port 0), or the PUB endpoint dialed.
	Endpoint, ReplayEndpoint string

	clock  func(time.Duration) time.Time
	pub    zmq4.Socket
	replay zmq4.Socket
	queue  chan []byte
	done   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	drop map[uint64]bool

	mu     sync.Mutex // guards buffer and next
	buffer []sentBatch
	first  int // index of the oldest batch in buffer (a ring once full)
	next   uint64
}

type sentBatch struct {
	seq     uint64
	payload []byte
}

// NewKVEventPublisher opens the sockets: an endpoint host "*" binds host (the
// server's address; "" binds every interface), any other is dialed. clock
// turns engine time into the wall-clock time stamped on batches.
func NewKVEventPublisher(cfg KVEventsConfig, host string, clock func(time.Duration) time.Time) (*KVEventPublisher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &KVEventPublisher{cfg: cfg, clock: clock, queue: make(chan []byte, cfg.MaxQueueSize),
		done: make(chan struct{}), cancel: cancel, drop: map[uint64]bool{}}
	for _, seq := range cfg.DropSequences {
		p.drop[seq] = true
	}
	p.pub = zmq4.NewPub(ctx, zmq4.WithLogger(discardLogger()))
	if cfg.HWM > 0 {
		_ = p.pub.SetOption(zmq4.OptionHWM, cfg.HWM)
	}
	fail := func(err error) (*KVEventPublisher, error) {
		p.Close()
		return nil, err
	}
	if bind, ok := bindAddress(cfg.Endpoint, host); ok {
		if err := p.pub.Listen(bind); err != nil {
			return fail(fmt.Errorf("kv events endpoint %s: %w", cfg.Endpoint, err))
		}
		p.Endpoint = "tcp://" + p.pub.Addr().String()
	} else {
		p.Endpoint = cfg.Endpoint
		p.wg.Add(1)
		go p.dial(ctx)
	}
	if cfg.ReplayEndpoint != "" {
		bind, ok := bindAddress(cfg.ReplayEndpoint, host)
		if !ok {
			bind = cfg.ReplayEndpoint // vLLM always binds the replay socket
		}
		p.replay = zmq4.NewRouter(ctx, zmq4.WithLogger(discardLogger()))
		if err := p.replay.Listen(bind); err != nil {
			return fail(fmt.Errorf("kv events replay endpoint %s: %w", cfg.ReplayEndpoint, err))
		}
		p.ReplayEndpoint = "tcp://" + p.replay.Addr().String()
		p.wg.Add(1)
		go p.serveReplay()
	}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// bindAddress turns an endpoint with host "*" into the address to bind.
func bindAddress(endpoint, host string) (string, bool) {
	hostPort := strings.TrimPrefix(endpoint, "tcp://")
	h, port, err := net.SplitHostPort(hostPort)
	if err != nil || (h != "*" && h != "::") {
		return "", false
	}
	if host == "" || host == "0.0.0.0" {
		host = "*"
	}
	return "tcp://" + net.JoinHostPort(host, port), true
}

func (p *KVEventPublisher) dial(ctx context.Context) {
	defer p.wg.Done()
	for ctx.Err() == nil && p.pub.Dial(p.cfg.Endpoint) != nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// PublishKVEvents implements KVEventSink: the batch is encoded now and sent in
// order by the publisher's goroutine. A full queue blocks the engine, as in vLLM.
func (p *KVEventPublisher) PublishKVEvents(at time.Duration, events []KVEvent) {
	ts := float64(p.clock(at).UnixNano()) / 1e9
	payload := EncodeKVEventBatch(nil, ts, events, p.cfg.IntBlockHashes)
	select {
	case p.queue <- payload:
	case <-p.done:
	}
}

// Sequence is the sequence number the next batch will carry.
func (p *KVEventPublisher) Sequence() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func (p *KVEventPublisher) run() {
	defer p.wg.Done()
	topic := []byte(p.cfg.Topic)
	for {
		var payload []byte
		select {
		case <-p.done:
			return
		case payload = <-p.queue:
		}
		p.mu.Lock()
		seq := p.next
		p.next++
		p.remember(seq, payload)
		p.mu.Unlock()
		if !p.drop[seq] {
			_ = p.pub.Send(zmq4.NewMsgFrom(topic, seqBytes(seq), payload))
		}
	}
}

// remember keeps the last BufferSteps batches for replay.
func (p *KVEventPublisher) remember(seq uint64, payload []byte) {
	if len(p.buffer) < p.cfg.BufferSteps {
		p.buffer = append(p.buffer, sentBatch{seq, payload})
		return
	}
	p.buffer[p.first] = sentBatch{seq, payload}
	p.first = (p.first + 1) % len(p.buffer)
}

// serveReplay answers replay requests: every buffered batch from the asked
// sequence on, then the end marker.
func (p *KVEventPublisher) serveReplay() {
	defer p.wg.Done()
	end := seqBytes(^uint64(0)) // -1 as a signed 8-byte integer
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
				continue
			}
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue // vLLM ignores malformed requests too
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		p.mu.Lock()
		var resend []sentBatch
		for i := range p.buffer {
			b := p.buffer[(p.first+i)%len(p.buffer)]
			if b.seq >= start {
				resend = append(resend, b)
			}
		}
		p.mu.Unlock()
		for _, b := range resend {
			_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, seqBytes(b.seq), b.payload))
		}
		_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, end, nil))
	}
}

// Close stops the publisher; batches not yet sent are dropped.
func (p *KVEventPublisher) Close() {
	p.once.Do(func() {
		close(p.done)
		p.cancel()
		if p.pub != nil {
			_ = p.pub.Close()
		}
		if p.replay != nil {
			_ = p.replay.Close()
		}
		p.wg.Wait()
	})
}

func seqBytes(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// discardLogger silences the ZMQ library's connection logs: a subscriber that
// probes and leaves is not an error of the server's.
func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
