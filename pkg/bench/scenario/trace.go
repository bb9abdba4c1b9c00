package scenario

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Trace formats.
const (
	TraceMooncake = "mooncake"
	TraceAzure    = "azure"
)

// TraceBlockTokens is the size of a Mooncake hash_ids block.
const TraceBlockTokens = 512

// MaxTraceBlockID bounds a block id: the replay writes each id into one token
// of the block's text (see pkg/bench/workload), which holds 2^24 values.
const MaxTraceBlockID = 1<<24 - 1

// Trace replaces the synthetic workload (arrival, stages, input, output,
// sharedPrefix, multiTurn) by a recorded one.
type Trace struct {
	// File is relative to the scenario file.
	File   string `yaml:"file"`
	Format string `yaml:"format"`
	// RateScale > 1 compresses the trace's time (more load), < 1 stretches it;
	// 0 means 1.
	RateScale float64 `yaml:"rateScale"`
	// Start skips this much of the trace (trace time); Duration keeps this much
	// after it (0: to the end), also in trace time.
	Start    time.Duration `yaml:"start"`
	Duration time.Duration `yaml:"duration"`

	// Records are the requests of the window [Start, Start+Duration), in
	// order, read on load and shared by every run of the scenario.
	Records []TraceRecord `yaml:"-"`
}

// TraceRecord is one request of a trace.
type TraceRecord struct {
	// At is the arrival since the start of the trace (trace time).
	At           time.Duration
	InputTokens  int
	OutputTokens int
	// Blocks are the prompt's 512-token blocks (the last may be partial): two
	// requests share exactly the leading blocks they have in common. Azure
	// requests get ids no other request has.
	Blocks []uint32
}

// Arrival is when r arrives in the run: its time after the window's start,
// compressed by the rate scale.
func (t *Trace) Arrival(r *TraceRecord) time.Duration {
	return time.Duration(float64(r.At-t.Start) / t.RateScale)
}

// validate checks the trace keys and that the rest of the workload leaves the
// synthetic keys out.
func (t *Trace) validate(w *Workload) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if t.File == "" {
		bad("workload.trace.file is required (a path relative to the scenario file)")
	}
	if t.Format != TraceMooncake && t.Format != TraceAzure {
		bad("workload.trace.format must be mooncake or azure, got %q", t.Format)
	}
	if !(t.RateScale > 0) || t.RateScale > 1e6 {
		bad("workload.trace.rateScale must be in (0, 1e6], got %v", t.RateScale)
	}
	if t.Start < 0 || t.Duration < 0 {
		bad("workload.trace.start and duration must not be negative")
	}
	synthetic := []struct {
		key string
		set bool
	}{
		{"arrival", w.Arrival != Arrival{}}, {"stages", len(w.Stages) > 0}, {"input", w.Input != Dist{}},
		{"output", w.Output != Dist{}}, {"sharedPrefix", w.SharedPrefix != nil}, {"multiTurn", w.MultiTurn != nil},
	}
	for _, k := range synthetic {
		if k.set {
			bad("workload.%s cannot be used with workload.trace, which gives the arrivals, lengths and prefixes: remove it", k.key)
		}
	}
	return errs
}

// loadTrace reads the trace file of s (relative to the scenario file), keeps
// the window's records and sets the scenario's duration to the window's
// length in run time.
func (s *Scenario) loadTrace() error {
	t := s.Workload.Trace
	if t.RateScale == 0 {
		t.RateScale = 1
	}
	if errs := t.validate(&s.Workload); len(errs) > 0 {
		return errors.Join(errs...)
	}
	path := t.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(s.File), path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("workload.trace.file: %w", err)
	}
	defer f.Close()
	records, err := ReadTrace(f, path, t.Format)
	if err != nil {
		return err
	}
	end := time.Duration(math.MaxInt64)
	if t.Duration > 0 {
		end = t.Start + t.Duration
	}
	for i := range records {
		if records[i].At >= t.Start && records[i].At < end {
			t.Records = append(t.Records, records[i])
		}
	}
	if len(t.Records) == 0 {
		return fmt.Errorf("%s: no request in the window start %v, duration %v of the trace", path, t.Start, t.Duration)
	}
	if t.Duration > 0 {
		s.Duration = time.Duration(float64(t.Duration) / t.RateScale)
	} else {
		// Just past the last arrival, so that it is released.
		s.Duration = t.Arrival(&t.Records[len(t.Records)-1]) + time.Millisecond
	}
	return nil
}

// ReadTrace parses a whole trace in format (mooncake or azure); name is the
// file named in errors, which give its line and the reason.
func ReadTrace(r io.Reader, name, format string) ([]TraceRecord, error) {
	switch format {
	case TraceMooncake:
		return readMooncake(r, name)
	case TraceAzure:
		return readAzure(r, name)
	}
	return nil, fmt.Errorf("%s: unknown trace format %q (mooncake or azure)", name, format)
}

// mooncakeLine is one JSONL line; pointers tell a missing key from a zero.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// maxTraceTokens bounds a request's token counts (no model has a longer context).
const maxTraceTokens = 1 << 24

func readMooncake(r io.Reader, name string) ([]TraceRecord, error) {
	var out []TraceRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	last := time.Duration(0)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
		}
		var l mooncakeLine
		if err := json.Unmarshal(text, &l); err != nil {
			return nil, fail("not a JSON object of timestamp, input_length, output_length, hash_ids: %v", err)
		}
		switch {
		case l.Timestamp == nil || l.InputLength == nil || l.OutputLength == nil:
			return nil, fail("timestamp, input_length and output_length are required")
		case len(l.HashIDs) == 0:
			return nil, fail("hash_ids is empty: every prompt has at least one block")
		}
		rec, err := newRecord(*l.Timestamp, *l.InputLength, *l.OutputLength, last, len(out) > 0)
		if err != nil {
			return nil, fail("%v", err)
		}
		want := (rec.InputTokens + TraceBlockTokens - 1) / TraceBlockTokens
		if len(l.HashIDs) != want {
			return nil, fail("input_length %d takes %d blocks of %d tokens, but hash_ids has %d", rec.InputTokens, want, TraceBlockTokens, len(l.HashIDs))
		}
		rec.Blocks = make([]uint32, len(l.HashIDs))
		for i, id := range l.HashIDs {
			if id < 0 || id > MaxTraceBlockID {
				return nil, fail("hash_ids[%d] = %d is outside 0..%d", i, id, MaxTraceBlockID)
			}
			rec.Blocks[i] = uint32(id)
		}
		last = rec.At
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, len(out)+1, err)
	}
	return out, nil
}

// newRecord checks one request's figures: ms is its timestamp in
// milliseconds, which must not precede the previous request's (prev, when
// there is one).
func newRecord(ms float64, input, output int, prev time.Duration, hasPrev bool) (TraceRecord, error) {
	if hasPrev && ms < float64(prev)/float64(time.Millisecond) {
		return TraceRecord{}, fmt.Errorf("timestamp %v ms precedes the previous request's %v ms: a trace is in arrival order", ms, float64(prev)/float64(time.Millisecond))
	}
	switch {
	case math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64/time.Millisecond):
		return TraceRecord{}, fmt.Errorf("timestamp %v is negative or out of range", ms)
	case input < 1 || input > maxTraceTokens:
		return TraceRecord{}, fmt.Errorf("input length %d is not in 1..%d", input, maxTraceTokens)
	case output < 1 || output > maxTraceTokens:
		return TraceRecord{}, fmt.Errorf("output length %d is not in 1..%d", output, maxTraceTokens)
	}
	return TraceRecord{At: max(prev, time.Duration(ms*float64(time.Millisecond))), InputTokens: input, OutputTokens: output}, nil
}

// azureTime is the Azure traces' timestamp layout (fractions of any length).
const azureTime = "2006-01-02 15:04:05.999999999"

func readAzure(r io.Reader, name string) ([]TraceRecord, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: %v", name, csvReason(err))
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	ts, okT := col["TIMESTAMP"]
	in, okI := col["ContextTokens"]
	outCol, okO := col["GeneratedTokens"]
	if !okT || !okI || !okO {
		return nil, fmt.Errorf("%s:1: the header must name TIMESTAMP, ContextTokens and GeneratedTokens, got %q", name, strings.Join(header, ","))
	}
	var out []TraceRecord
	var first time.Time
	nextBlock := uint32(0)
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			line := 0
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
			}
			return nil, fmt.Errorf("%s:%d: %v", name, line, csvReason(err))
		}
		line, _ := cr.FieldPos(0)
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
		}
		at, err := time.Parse(azureTime, strings.TrimSpace(row[ts]))
		if err != nil {
			return nil, fail("TIMESTAMP %q is not a time such as 2023-11-16 18:15:46.6805900", row[ts])
		}
		input, err1 := strconv.Atoi(strings.TrimSpace(row[in]))
		output, err2 := strconv.Atoi(strings.TrimSpace(row[outCol]))
		if err1 != nil || err2 != nil {
			return nil, fail("ContextTokens and GeneratedTokens must be whole numbers, got %q and %q", row[in], row[outCol])
		}
		if len(out) == 0 {
			first = at
		}
		prev := time.Duration(0)
		if len(out) > 0 {
			prev = out[len(out)-1].At
		}
		rec, err := newRecord(float64(at.Sub(first))/float64(time.Millisecond), input, output, prev, len(out) > 0)
		if err != nil {
			return nil, fail("%v", err)
		}
		// Azure records no prefixes: every request gets blocks of its own.
		n := (input + TraceBlockTokens - 1) / TraceBlockTokens
		if int(nextBlock)+n > MaxTraceBlockID+1 {
			return nil, fail("the trace has more than %d blocks of %d tokens", MaxTraceBlockID+1, TraceBlockTokens)
		}
		rec.Blocks = make([]uint32, n)
		for i := range rec.Blocks {
			rec.Blocks[i] = nextBlock
			nextBlock++
		}
		out = append(out, rec)
	}
	return out, nil
}

// csvReason is encoding/csv's error without its own line prefix.
func csvReason(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	if err == io.EOF {
		return errors.New("the file is empty: want a header TIMESTAMP,ContextTokens,GeneratedTokens")
	}
	return err
}
