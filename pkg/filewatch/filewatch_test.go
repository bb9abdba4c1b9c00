package filewatch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
)

// recorder is an Apply that accepts anything but "bad".
type recorder struct{ applied []string }

func (r *recorder) apply(data []byte) error {
	if bytes.HasPrefix(data, []byte("bad")) {
		return errors.New("refused")
	}
	r.applied = append(r.applied, string(data))
	return nil
}

func TestLoadFollowsSymlinkSwapsAndKeepsLastGood(t *testing.T) {
	cm := testfile.NewConfigMap(t, map[string]string{"settings.yaml": "v1"})
	var rec recorder
	var logs bytes.Buffer
	var results []error
	f := &File{Path: cm.Path("settings.yaml"), What: "settings", Apply: rec.apply,
		Log:    slog.New(slog.NewTextHandler(&logs, nil)),
		OnLoad: func(err error, _ time.Time) { results = append(results, err) }}

	if err := f.Load(); err != nil || strings.Join(rec.applied, ",") != "v1" {
		t.Fatalf("first load: %v, applied %q", err, rec.applied)
	}
	first := f.Status()
	if !first.Loaded || first.Error != "" || len(first.Digest) != 64 {
		t.Fatalf("status after first load %+v", first)
	}
	if err := f.Load(); err != nil || len(rec.applied) != 1 || len(results) != 1 {
		t.Fatalf("unchanged file re-applied: %v %q", err, rec.applied)
	}

	cm.Update(map[string]string{"settings.yaml": "bad v2"})
	err := f.Load()
	if err == nil || !strings.Contains(err.Error(), "settings") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("rejected file: err %v", err)
	}
	st := f.Status()
	if len(rec.applied) != 1 || !st.Loaded || st.Digest != first.Digest || !strings.Contains(st.Error, "refused") {
		t.Fatalf("after a rejected file: applied %q, status %+v", rec.applied, st)
	}
	if !strings.Contains(logs.String(), "settings rejected; keeping the last good one") {
		t.Fatalf("rejection not logged: %s", logs.String())
	}
	if err2 := f.Load(); err2 == nil || len(results) != 2 {
		t.Fatalf("unchanged rejected file: err %v, %d results (want the same error, reported once)", err2, len(results))
	}

	cm.Update(map[string]string{"settings.yaml": "v3"})
	if err := f.Load(); err != nil || strings.Join(rec.applied, ",") != "v1,v3" {
		t.Fatalf("fixed file: %v, applied %q", err, rec.applied)
	}
	if st := f.Status(); st.Error != "" || st.Digest == first.Digest {
		t.Fatalf("status after the fix %+v", st)
	}
}

func TestMissingFileKeepsWhatIsInEffect(t *testing.T) {
	cm := testfile.NewConfigMap(t, map[string]string{"m.yaml": "v1"})
	var rec recorder
	reports := 0
	f := &File{Path: cm.Path("m.yaml"), What: "mapping", Apply: rec.apply, Log: slog.New(slog.DiscardHandler),
		OnLoad: func(err error, _ time.Time) {
			if err != nil {
				reports++
			}
		}}
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	hidden := cm.Path("m.yaml") + ".hidden"
	if err := os.Rename(cm.Path("m.yaml"), hidden); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.Load(); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("missing file: %v", err)
		}
	}
	if st := f.Status(); !st.Loaded || st.Error == "" || reports != 1 {
		t.Fatalf("missing file: status %+v, reported %d times (want once)", st, reports)
	}
	if err := os.Rename(hidden, cm.Path("m.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := f.Load(); err != nil || len(rec.applied) != 1 {
		t.Fatalf("file back unchanged: %v, applied %q", err, rec.applied)
	}
	if st := f.Status(); st.Error != "" {
		t.Fatalf("error kept after the file came back: %+v", st)
	}
}

func TestNoFileAtStart(t *testing.T) {
	f := &File{Path: filepath.Join(t.TempDir(), "absent"), What: "mapping", Apply: (&recorder{}).apply,
		Log: slog.New(slog.DiscardHandler)}
	if err := f.Load(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absent file: %v", err)
	}
	if st := f.Status(); st.Loaded || st.Error == "" {
		t.Fatalf("absent file: status %+v", st)
	}
}

func TestRunPicksUpChanges(t *testing.T) {
	cm := testfile.NewConfigMap(t, map[string]string{"m.yaml": "v1"})
	loaded := make(chan error, 10)
	var rec recorder
	f := &File{Path: cm.Path("m.yaml"), What: "mapping", Interval: time.Millisecond, Apply: rec.apply,
		Log: slog.New(slog.DiscardHandler), OnLoad: func(err error, _ time.Time) { loaded <- err }}
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	<-loaded
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	cm.Update(map[string]string{"m.yaml": "v2"})
	select {
	case err := <-loaded:
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change was never loaded")
	}
	cancel()
	<-done
	if got := strings.Join(rec.applied, ","); got != "v1,v2" {
		t.Fatalf("applied %q", got)
	}
}

func TestParsedAppliesOnlyWhatParses(t *testing.T) {
	var got []string
	apply := Parsed(func(data []byte) (string, error) {
		if len(data) == 0 {
			return "", errors.New("empty")
		}
		return strings.ToUpper(string(data)), nil
	}, func(v string) { got = append(got, v) })
	if err := apply([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := apply(nil); err == nil || err.Error() != "empty" {
		t.Fatalf("a parse error came back as %v", err)
	}
	if strings.Join(got, ",") != "A" {
		t.Fatalf("applied %q, want only the parsed A", got)
	}
}
