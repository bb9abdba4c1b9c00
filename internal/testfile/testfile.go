// Package testfile lays out the files that code under test reads: single
// files (configurations, endpoint lists, tokens) and ConfigMap volumes as the
// kubelet mounts and updates them.
package testfile

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Write writes content to name in dir (a new temporary directory of t when
// dir is empty) and returns the file's path. Tokens are among such files, so
// only the owner may read it.
func Write(t testing.TB, dir, name, content string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ConfigMap is a directory laid out as the kubelet lays out a ConfigMap
// volume: each key is a symlink through ..data, and ..data points to a
// generation directory that an update replaces atomically. Watchers of such
// files see a rename, never a partly written file.
type ConfigMap struct {
	t   testing.TB
	dir string
	gen int
}

// NewConfigMap lays out a volume of files (key: content) in a new temporary
// directory of t.
func NewConfigMap(t testing.TB, files map[string]string) *ConfigMap {
	t.Helper()
	c := &ConfigMap{t: t, dir: t.TempDir()}
	c.Update(files)
	for key := range files {
		if err := os.Symlink(filepath.Join("..data", key), c.Path(key)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Path is where key's file is read.
func (c *ConfigMap) Path(key string) string { return filepath.Join(c.dir, key) }

// Update replaces the volume's content with files, as the kubelet does when
// the ConfigMap changes: a new generation directory with every key, then a
// rename of a fresh ..data link over the old one.
func (c *ConfigMap) Update(files map[string]string) {
	c.t.Helper()
	c.gen++
	gen := "..gen" + strconv.Itoa(c.gen)
	if err := os.Mkdir(filepath.Join(c.dir, gen), 0o755); err != nil {
		c.t.Fatal(err)
	}
	for key, content := range files {
		Write(c.t, filepath.Join(c.dir, gen), key, content)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
}
