package activator

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/s3/s3test"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/messages"
)

// PERF-5: a request to a hibernated host with a 64 MiB checkpoint (no
// local copy). Reported per wake, medians over b.N wakes:
//
//	ttfb_ms     first byte of the response, as the client sees it
//	restore_ms  a bare checkpoint.RestoreDeferred of the same checkpoint,
//	            as a wake restores (baseline; the sync is not timed)
//	start_ms    a bare process start until the app accepts (baseline)
//	overhead_ms ttfb - (restore + start): the target is at most 50ms (fs)
//	raw_get_ms  a bare SDK GetObject of the same tree as one tar archive (s3 only)
//	ttfb/raw    ttfb over raw_get: the target is at most 1.5 (s3)
//
// Run: go test -run '^$' -bench WakeLatency -benchtime 3x ./actors/activator/
func BenchmarkWakeLatency(b *testing.B) {
	b.Run("fs", func(b *testing.B) {
		store := fsStore(b, b.TempDir())
		benchWake(b, store, nil)
	})
	b.Run("minio", func(b *testing.B) {
		s3s, prefix := s3test.RealStore(b, nil)
		raw := func(ctx context.Context, key string) error {
			out, err := s3s.Client().GetObject(ctx, &awss3.GetObjectInput{Bucket: ptr(s3s.Bucket()), Key: ptr(prefix + "/" + key)})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			_, err = io.Copy(io.Discard, out.Body)
			return err
		}
		benchWake(b, objstore.Prefixed(s3s, prefix), raw)
	})
}

func ptr(s string) *string { return &s }

func benchWake(b *testing.B, store objstore.Store, rawGet func(context.Context, string) error) {
	ctx := context.Background()
	clk := clock.New()
	drv := processDriver(b)
	n := newNode(b, "n1", store, clk, nodeOpts{driver: drv})
	def := hostDef("bench", "notes", "notes.localhost", func(s *stackfile.Service) {
		exe, _ := os.Executable()
		s.Command = []string{exe}
		s.Env = stackfile.Env{"ENGENHO_TEST_APP": stackfile.Plain("1")}
		s.Healthcheck.StartInterval = 500 * time.Millisecond
		s.Hibernate.Idle = 200 * time.Millisecond
	})
	n.define(def)
	eventually(b, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
	if code, _, _ := n.get("notes.localhost", "/count"); code != http.StatusOK {
		b.Fatalf("first wake: %d", code)
	}
	dataDir := filepath.Join(n.dir, "hosts", "notes.localhost", "data")
	eventually(b, clk, 0, "first sleep", func() bool {
		return n.events.count(messages.KindHostSlept) >= 1 && n.state("notes.localhost") == messages.HostAsleep
	})
	// The state grows to 64 MiB while asleep; the next wake uses this warm
	// copy and its sleep checkpoints it.
	writeTree(b, dataDir)
	if code, _, _ := n.get("notes.localhost", "/count"); code != http.StatusOK {
		b.Fatalf("second wake: %d", code)
	}
	eventually(b, clk, 0, "second sleep", func() bool {
		return n.events.count(messages.KindHostSlept) >= 2 && n.state("notes.localhost") == messages.HostAsleep
	})

	cps, err := checkpoint.New(checkpoint.Config{Store: store, Prefix: "engenho", Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	var ttfb, restore, start, rawGets []time.Duration
	var yardstick string // the raw GET's object: the restored tree as one tar archive
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		eventually(b, clk, 0, "asleep", func() bool { return n.state("notes.localhost") == messages.HostAsleep })
		os.RemoveAll(filepath.Dir(dataDir))
		b.StartTimer()
		d := firstByte(b, n, "notes.localhost", "/healthz")
		b.StopTimer()
		ttfb = append(ttfb, d)
		eventually(b, clk, 0, "asleep again", func() bool { return n.events.count(messages.KindHostSlept) >= i+3 })

		head, err := cps.Load(ctx, "notes.localhost")
		if err != nil || head.Manifest.Current == nil || head.Manifest.Current.Unpacked < 64<<20 {
			b.Fatalf("no 64 MiB checkpoint: %v %+v", err, head.Manifest.Current)
		}
		dest := filepath.Join(b.TempDir(), "data")
		// As the wake restores: the sync runs after the instance starts.
		began := time.Now()
		_, settle, err := cps.RestoreDeferred(ctx, head, dest)
		if err != nil {
			b.Fatal(err)
		}
		restore = append(restore, time.Since(began))
		if err := settle(); err != nil {
			b.Fatal(err)
		}
		start = append(start, bareStart(b, drv, def))
		if rawGet != nil {
			if yardstick == "" {
				yardstick = tarOf(b, store, clk, dest)
			}
			began = time.Now()
			if err := rawGet(ctx, yardstick); err != nil {
				b.Fatal(err)
			}
			rawGets = append(rawGets, time.Since(began))
		}
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	t, r, s := median(ttfb), median(restore), median(start)
	b.ReportMetric(ms(t), "ttfb_ms")
	b.ReportMetric(ms(r), "restore_ms")
	b.ReportMetric(ms(s), "start_ms")
	b.ReportMetric(ms(t-r-s), "overhead_ms")
	if rawGet != nil {
		g := median(rawGets)
		b.ReportMetric(ms(g), "raw_get_ms")
		b.ReportMetric(float64(t)/float64(g), "ttfb/raw")
	}
	if woke, ok := n.events.last(messages.KindHostWoke); ok {
		var parts []string
		for _, step := range []string{"definition", "lease", "restore", "start", "ready"} {
			parts = append(parts, step+"="+woke.Fields["step."+step])
		}
		b.Logf("last wake steps: %s", strings.Join(parts, " "))
	}
}

// tarOf saves dir as a tar checkpoint under its own prefix and returns
// its archive's key: the raw download's yardstick, the same bytes as one
// object (a cas checkpoint is an index and many objects).
func tarOf(b testing.TB, store objstore.Store, clk clock.Clock, dir string) string {
	b.Helper()
	ctx := context.Background()
	c, err := checkpoint.New(checkpoint.Config{Store: store, Prefix: "yardstick", Clock: clk, Format: checkpoint.Tar})
	if err != nil {
		b.Fatal(err)
	}
	head, err := c.Claim(ctx, "notes.localhost", checkpoint.Writer{Holder: "bench", Node: "n1", Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	head, _, err = c.Save(ctx, head, dir)
	if err != nil {
		b.Fatal(err)
	}
	return head.Manifest.Current.Key
}

// writeTree puts 64 MiB of incompressible data in dir: a 56 MiB database
// file and 256 files of 32 KiB.
func writeTree(b testing.TB, dir string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "small"), 0o700); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 56<<20)
	rand.Read(buf)
	if err := os.WriteFile(filepath.Join(dir, "db"), buf, 0o600); err != nil {
		b.Fatal(err)
	}
	for i := range 256 {
		if err := os.WriteFile(filepath.Join(dir, "small", fmt.Sprint(i)), buf[i<<15:(i+1)<<15], 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// firstByte times a request through the edge to its first response byte.
func firstByte(b testing.TB, n *node, hostName, path string) time.Duration {
	var first time.Time
	req, _ := http.NewRequest("GET", n.srv.URL+path, nil)
	req.Host = hostName
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { first = time.Now() },
	}))
	began := time.Now()
	resp, err := n.srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("wake: %d", resp.StatusCode)
	}
	return first.Sub(began)
}

// bareStart is the baseline process start: create and start the same app
// with the process driver and connect every millisecond until it accepts.
func bareStart(b testing.TB, drv *process.Driver, def messages.HostDefinition) time.Duration {
	ctx := context.Background()
	svc := def.Definition
	spec := stackfile.InstanceSpec(svc, stackfile.Instance{Stack: "baseline", Slot: 1, ID: newBenchID(), Deployment: "1"})
	spec.Env["ENGENHO_DATA_DIR"] = b.TempDir()
	if err := drv.Create(ctx, spec); err != nil {
		b.Fatal(err)
	}
	defer func() {
		drv.Stop(ctx, spec.Name, 5*time.Second)
		drv.Delete(ctx, spec.Name)
	}()
	began := time.Now()
	if err := drv.Start(ctx, spec.Name); err != nil {
		b.Fatal(err)
	}
	st, err := drv.Inspect(ctx, spec.Name)
	if err != nil || st.State != drivers.StateRunning {
		b.Fatalf("baseline start: %v %v", st.State, err)
	}
	addr := st.Addresses[80]
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return time.Since(began)
		}
		if time.Since(began) > 10*time.Second {
			b.Fatalf("baseline app never listened on %s", addr)
		}
		time.Sleep(time.Millisecond)
	}
}

var benchIDs int

func newBenchID() string {
	benchIDs++
	return fmt.Sprintf("b%04d", benchIDs)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
