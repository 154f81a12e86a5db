package treetest

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/messages"
)

// failFastStack is two replicas on the process driver whose exec
// healthcheck runs every second; %s is the probe's shell script.
const failFastStack = `services:
  api:
    command: ["/bin/sh", "-c", "sleep 100000"]
    healthcheck:
      test: ["CMD-SHELL", %q]
      interval: 1s
      retries: 2
    deploy:
      replicas: 2
      update_config:
        order: start-first
        failure_action: rollback
`

// BenchmarkSVC13RolloutFailFast measures, in real time on real processes,
// how long a rollout takes to fail when its new instance's healthcheck
// fails (interval 1s, retries 2, no start_period): from the apply to the
// deploy.failed event. Before issue 13 this waited for the deadline,
// max(start_period, 60s) + interval × retries + 30s = 92s; now it is about
// interval × (retries - 1), since the first probe runs at the start.
func BenchmarkSVC13RolloutFailFast(b *testing.B) {
	dir := b.TempDir()
	drv, err := process.New(process.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer drv.Close()
	t, err := New(Options{Driver: drv})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = t.Stop() }()
	defer removeAll(b, t, drv, "ff") // stopping the tree leaves workloads running
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := t.Apply("ff", fmt.Sprintf(failFastStack, fmt.Sprintf("echo good %d", i))); err != nil {
			b.Fatal(err)
		}
		if !t.WaitFor(time.Minute, func() bool { return t.Converged("ff") && t.Service("ff", "api").Rollout == nil }) {
			b.Fatalf("run %d: the good revision did not converge:\n%s", i, t.Events)
		}
		failed := t.Events.Count(messages.KindDeployFailed)
		b.StartTimer()
		start := time.Now()
		if _, err := t.Apply("ff", fmt.Sprintf(failFastStack, fmt.Sprintf("echo broken %d; exit 1", i))); err != nil {
			b.Fatal(err)
		}
		if !t.WaitFor(2*time.Minute, func() bool { return t.Events.Count(messages.KindDeployFailed) > failed }) {
			b.Fatalf("run %d: no deploy.failed:\n%s", i, t.Events)
		}
		lat = append(lat, time.Since(start))
		b.Logf("run %d: %s", i, lat[len(lat)-1])
		if last := t.Events.All(); !strings.Contains(lastOf(last, messages.KindDeployFailed), "turned unhealthy") {
			b.Fatalf("run %d: %s", i, lastOf(last, messages.KindDeployFailed))
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(0, "ns/op")
}

// removeAll removes stack and waits until the driver runs nothing of it.
func removeAll(b *testing.B, t *Tree, drv drivers.Driver, stack string) {
	t.Send(messages.RemoveStack{Stack: stack})
	if !t.WaitFor(time.Minute, func() bool {
		st, err := drv.List(context.Background(), drivers.Labels{drivers.LabelStack: stack})
		return err == nil && len(st) == 0
	}) {
		b.Errorf("stack %s still has instances after its removal", stack)
	}
}

func lastOf(evs []messages.Event, kind string) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i].Message
		}
	}
	return ""
}
