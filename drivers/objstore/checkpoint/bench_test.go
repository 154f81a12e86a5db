package checkpoint_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	fsstore "github.com/engenho/engenho/drivers/objstore/fs"
	s3store "github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
)

const benchSize = 64 << 20

// benchTree makes a 64 MiB data directory: one 56 MiB file (a database)
// and 256 files of 32 KiB, all incompressible.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "small"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db"), bytesOf(56<<20, 1), 0o600); err != nil {
		b.Fatal(err)
	}
	for i := range 256 {
		if err := os.WriteFile(filepath.Join(dir, "small", fmt.Sprint(i)), bytesOf(32<<10, byte(i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// benchRestore saves the tree once, then restores it b.N times, with
// fsync on as in production.
func benchRestore(b *testing.B, store objstore.Store, format checkpoint.Format) {
	c, err := checkpoint.New(checkpoint.Config{Store: store, Prefix: "bench", Clock: clock.New(), Format: format, NoSync: os.Getenv("BENCH_NOSYNC") != ""})
	if err != nil {
		b.Fatal(err)
	}
	head, err := c.Claim(ctx, "bench.example.com", writerA)
	if err != nil {
		b.Fatal(err)
	}
	head, _, err = c.Save(ctx, head, benchTree(b))
	if err != nil {
		b.Fatal(err)
	}
	parent := b.TempDir()
	if d := os.Getenv("BENCH_DEST"); d != "" {
		parent, err = os.MkdirTemp(d, "bench-restore-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(parent)
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dst := filepath.Join(parent, fmt.Sprint(i))
		if _, err := c.Restore(ctx, head, dst); err != nil {
			b.Fatal(err)
		}
		b.StopTimer() // deleting 64 MiB is not part of a restore
		os.RemoveAll(dst)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(head.Manifest.Current.Size)/(1<<20), "archive-MiB")
}

// PERF-5: restore of a 64 MiB checkpoint from the fs store.
func BenchmarkRestore64MiBFS(b *testing.B) {
	store, err := fsstore.Open(b.TempDir(), fsstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	benchRestore(b, store, checkpoint.Tar)
}

// PERF-5: restore of a 64 MiB checkpoint from MinIO, in both formats.
func BenchmarkRestore64MiBMinIO(b *testing.B) {
	for _, format := range []checkpoint.Format{checkpoint.Tar, checkpoint.TarGz} {
		b.Run(string(format), func(b *testing.B) { benchRestore(b, s3test.Real(b, nil), format) })
	}
}

// PERF-5: the yardstick: a raw SDK GetObject of a 64 MiB object on MinIO,
// read to the end.
func BenchmarkRawGetObject64MiBMinIO(b *testing.B) {
	store, prefix := s3test.RealStore(b, nil)
	key := prefix + "/raw-64MiB"
	data := bytesOf(benchSize, 3)
	if _, err := store.Put(ctx, key, bytesReader(data), objstore.Always); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		rawGet(b, store, key)
	}
}

func rawGet(b *testing.B, store *s3store.Store, key string) {
	bucket := store.Bucket()
	out, err := store.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out.Body)
	out.Body.Close()
	if err != nil || n != benchSize {
		b.Fatalf("read %d bytes: %v", n, err)
	}
}

// PERF-5: the ratio itself. Each iteration downloads the archive object
// raw with the SDK and restores it (to in place: RestoreDeferred, the
// part on the wake path; the sync runs after the instance starts),
// alternating so drift on a shared machine hits both alike. Reports
// raw-ms, restore-ms and restore/raw (means), and the same for the
// fastest iteration of each.
func BenchmarkPERF5RestoreVsRawMinIO(b *testing.B) {
	store, prefix := s3test.RealStore(b, nil)
	view := objstore.Prefixed(store, prefix)
	c, err := checkpoint.New(checkpoint.Config{Store: view, Prefix: "bench", Clock: clock.New()})
	if err != nil {
		b.Fatal(err)
	}
	head, err := c.Claim(ctx, "bench.example.com", writerA)
	if err != nil {
		b.Fatal(err)
	}
	if head, _, err = c.Save(ctx, head, benchTree(b)); err != nil {
		b.Fatal(err)
	}
	key := prefix + "/" + head.Manifest.Current.Key
	parent := benchDest(b)
	var raw, restore time.Duration
	minRaw, minRestore := time.Duration(1<<62), time.Duration(1<<62)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		rawGetN(b, store, key, head.Manifest.Current.Size)
		t1 := time.Now()
		dst := filepath.Join(parent, fmt.Sprint(i))
		if _, _, err := c.RestoreDeferred(ctx, head, dst); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		raw, restore = raw+t1.Sub(t0), restore+t2.Sub(t1)
		minRaw, minRestore = min(minRaw, t1.Sub(t0)), min(minRestore, t2.Sub(t1))
		b.StopTimer()
		os.RemoveAll(dst)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Milliseconds())/n, "raw-ms")
	b.ReportMetric(float64(restore.Milliseconds())/n, "restore-ms")
	b.ReportMetric(float64(restore)/float64(raw), "restore/raw")
	// The fastest of each is the least disturbed by other load.
	b.ReportMetric(float64(minRaw.Microseconds())/1000, "min-raw-ms")
	b.ReportMetric(float64(minRestore.Microseconds())/1000, "min-restore-ms")
	b.ReportMetric(float64(minRestore)/float64(minRaw), "min-restore/min-raw")
}

// benchDest is where restores land: BENCH_DEST (e.g. /dev/shm) or a temp
// dir on the test's disk.
func benchDest(b *testing.B) string {
	d := os.Getenv("BENCH_DEST")
	if d == "" {
		return b.TempDir()
	}
	parent, err := os.MkdirTemp(d, "bench-restore-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(parent) })
	return parent
}

func rawGetN(b *testing.B, store *s3store.Store, key string, size int64) {
	bucket := store.Bucket()
	out, err := store.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out.Body)
	out.Body.Close()
	if err != nil || n != size {
		b.Fatalf("read %d bytes: %v", n, err)
	}
}
