package checkpoint

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, link string
	typ        byte
	body       string
	size       int64 // overrides len(body) in the header when set
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir || e.typ == tar.TypeSymlink || e.typ == tar.TypeChar {
			hdr.Size = 0
		}
		if e.size != 0 {
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return buf.Bytes()
}

// SEC-3, ACT-9: an archive cannot write outside the restore directory, by
// name or through a symlink, nor create devices, duplicates or more bytes
// than its manifest declares; one cut short in a file is refused too.
func TestUnpackRefusesHostileArchives(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]entry{
		"dot-dot":             {{name: "../escape", typ: tar.TypeReg, body: "x"}},
		"nested dot-dot":      {{name: "a/../../escape", typ: tar.TypeReg, body: "x"}},
		"absolute":            {{name: filepath.Join(outside, "escape"), typ: tar.TypeReg, body: "x"}},
		"through symlink":     {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/escape", typ: tar.TypeReg, body: "x"}},
		"through inside link": {{name: "d", typ: tar.TypeDir}, {name: "link", typ: tar.TypeSymlink, link: "d"}, {name: "link/f", typ: tar.TypeReg, body: "x"}},
		"device":              {{name: "tty", typ: tar.TypeChar}},
		"hard link":           {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "g", typ: tar.TypeLink, link: "f"}},
		"duplicate":           {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "f", typ: tar.TypeReg, body: "y"}},
		"over the limit":      {{name: "big", typ: tar.TypeReg, body: "0123456789abcdef"}},
		"root as symlink":     {{name: ".", typ: tar.TypeSymlink, link: outside}},
		"cut short":           {{name: "f", typ: tar.TypeReg, body: "x", size: 6}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := unpack(context.Background(), bytes.NewReader(tarOf(t, entries...)), dir, 8)
			if !errors.Is(err, errBadArchive) {
				t.Fatalf("hostile archive: %v, want errBadArchive", err)
			}
			if left, _ := os.ReadDir(outside); len(left) != 0 {
				t.Fatalf("wrote outside: %v", left)
			}
		})
	}
}

func TestUnpackBadArchiveIsCorrupt(t *testing.T) {
	_, err := unpack(context.Background(), bytes.NewReader([]byte("this is not a tar archive at all, not even close, no................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................")), t.TempDir(), 100)
	if !errors.Is(err, errBadArchive) {
		t.Fatalf("garbage: %v", err)
	}
}
