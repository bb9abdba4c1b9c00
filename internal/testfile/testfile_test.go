package testfile

import (
	"os"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A written file holds its content, readable by its owner only; a ConfigMap's
// keys read the latest update through their symlinks, and a key the update
// leaves out is gone, as in a kubelet volume.
func TestWriteAndConfigMapUpdates(t *testing.T) {
	p := Write(t, "", "token", "secret\n")
	if got := read(t, p); got != "secret\n" {
		t.Fatalf("Write: %q", got)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("Write: mode %v %v, want 0600", st.Mode().Perm(), err)
	}

	cm := NewConfigMap(t, map[string]string{"a.yaml": "a1", "b.yaml": "b1"})
	if read(t, cm.Path("a.yaml")) != "a1" || read(t, cm.Path("b.yaml")) != "b1" {
		t.Fatal("the first generation is not what the keys read")
	}
	if st, err := os.Lstat(cm.Path("a.yaml")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("a key is no symlink: %v %v", st.Mode(), err)
	}
	cm.Update(map[string]string{"a.yaml": "a2"})
	if got := read(t, cm.Path("a.yaml")); got != "a2" {
		t.Fatalf("after the update a.yaml reads %q", got)
	}
	if _, err := os.Stat(cm.Path("b.yaml")); !os.IsNotExist(err) {
		t.Fatalf("b.yaml, left out of the update, still resolves: %v", err)
	}
}
