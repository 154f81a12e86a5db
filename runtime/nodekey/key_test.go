package nodekey

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// SEC-2: the key file is created once, 0600, whole, and read back; two
// processes racing to create it end up with one key; a file readable by
// others or damaged is refused with a message that says what to do.
func TestLoadOrCreateSEC2(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	k, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	sealed, err := k.Seal("env:A", "value")
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Open("env:A", sealed); err != nil || v != "value" {
		t.Fatalf("a reloaded key does not open what the first sealed: %q %v", v, err)
	}
	if k.Digest("env:A", "value") != again.Digest("env:A", "value") {
		t.Fatal("digest changed across a reload")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("left temporary files: %v", entries)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("an exposed key: %v", err)
	}
	os.Chmod(path, 0o600)
	for name, content := range map[string]string{
		"empty":     "",
		"truncated": "engenho-node-key-v1 0011",
		"other":     "not a key\n",
		"bad hex":   "engenho-node-key-v1 " + strings.Repeat("zz", 32) + "\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreate(path); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "restore it") {
			t.Errorf("%s key file: %v", name, err)
		}
	}
}

func TestConcurrentCreateOneKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	keys := make([]*Key, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreate(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != nil && k.Digest("l", "v") != keys[0].Digest("l", "v") {
			t.Fatal("racing creators ended with different keys")
		}
	}
}

// SEC-2: sealing is AES-GCM with a random nonce and the label as
// additional data: two seals differ, each opens only with its key and
// label, and any change to the sealed text is detected. Digests depend on
// the key, the label and the value.
func TestSealOpenDigestSEC2(t *testing.T) {
	k1, _ := New(bytes.Repeat([]byte{1}, 32))
	k2, _ := New(bytes.Repeat([]byte{2}, 32))
	a, _ := k1.Seal("env:PW", "hunter2")
	b, _ := k1.Seal("env:PW", "hunter2")
	if a == b {
		t.Fatal("two seals are equal: the nonce is not random")
	}
	if strings.Contains(a, "hunter2") || !strings.HasPrefix(a, "v1:") {
		t.Fatalf("sealed form %q", a)
	}
	if v, err := k1.Open("env:PW", a); err != nil || v != "hunter2" {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := k2.Open("env:PW", a); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("another key opened it: %v", err)
	}
	if _, err := k1.Open("env:OTHER", a); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("another label opened it: %v", err)
	}
	tampered := a[:len(a)-2] + "AA"
	if tampered == a {
		tampered = a[:len(a)-2] + "BB"
	}
	if _, err := k1.Open("env:PW", tampered); err == nil {
		t.Fatal("a tampered value opened")
	}
	for _, bad := range []string{"", "v1:", "v2:abc", "v1:!!!", "hunter2"} {
		if _, err := k1.Open("env:PW", bad); !errors.Is(err, ErrFormat) {
			t.Errorf("Open(%q): %v", bad, err)
		}
	}
	empty, _ := k1.Seal("env:E", "")
	if v, err := k1.Open("env:E", empty); err != nil || v != "" {
		t.Fatalf("empty value: %q %v", v, err)
	}
	d := k1.Digest("env:PW", "hunter2")
	if d == k2.Digest("env:PW", "hunter2") || d == k1.Digest("env:PW", "hunter3") || d == k1.Digest("env:PX", "hunter2") {
		t.Fatal("digest ignores the key, the value or the label")
	}
	if strings.Contains(d, "hunter2") {
		t.Fatal("digest shows the value")
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key accepted")
	}
}
