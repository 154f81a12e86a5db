package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	fsstore "github.com/engenho/engenho/drivers/objstore/fs"
)

// ACT-15: the upload of a 1-file change (4 KiB) in a 64 MiB data dir of
// 64 files of 1 MiB, per format, on the fs store. It prints the figure
// (upload-bytes per save) that docs/objstore.md quotes.
func BenchmarkACT15OneFileChange64MiB(b *testing.B) {
	for _, format := range []checkpoint.Format{checkpoint.Cas, checkpoint.Tar} {
		b.Run(string(format), func(b *testing.B) {
			store, err := fsstore.Open(b.TempDir(), fsstore.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			benchOneFileChange(b, store, format)
		})
	}
}

func benchOneFileChange(b *testing.B, store objstore.Store, format checkpoint.Format) {
	c, err := checkpoint.New(checkpoint.Config{Store: store, Prefix: "bench", Clock: clock.New(), Format: format, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "data")
	manyFiles(b, dir, 64, 1<<20)
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, bytesOf(4096, 0), 0o644); err != nil {
		b.Fatal(err)
	}
	head, err := c.Claim(ctx, "bench.example.com", writerA)
	if err != nil {
		b.Fatal(err)
	}
	head, first, err := c.Save(ctx, head, dir)
	if err != nil {
		b.Fatal(err)
	}
	var uploaded int64
	n := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := os.WriteFile(small, bytesOf(4096, byte(i+1)), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var st checkpoint.Stats
		head, st, err = c.Save(ctx, head, dir)
		if err != nil {
			b.Fatal(err)
		}
		uploaded += st.Bytes
		n++
	}
	b.StopTimer()
	per := float64(uploaded) / float64(n)
	b.ReportMetric(per, "upload-B/save")
	b.ReportMetric(float64(first.Bytes), "first-upload-B")
	fmt.Printf("ACT-15 %s: 1-file (4 KiB) change in a 64 MiB dir (64 x 1 MiB): %.0f bytes uploaded per save (first full save %d bytes)\n", format, per, first.Bytes)
}

// PERF-5, ACT-15: restore of a 64 MiB Cas checkpoint (one 56 MiB file and
// 256 of 32 KiB) from the fs store, beside BenchmarkRestore64MiBFS (tar).
func BenchmarkRestore64MiBFSCas(b *testing.B) {
	store, err := fsstore.Open(b.TempDir(), fsstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	benchRestore(b, store, checkpoint.Cas)
}
