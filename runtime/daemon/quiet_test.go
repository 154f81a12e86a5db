package daemon

import (
	"io"
	"testing"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/logging"
	"github.com/rs/zerolog"
)

type sinkLog struct{ evs []messages.Event }

func (s *sinkLog) Emit(ev messages.Event) { s.evs = append(s.evs, ev) }

// SVC-26: the daemon seeds the quiet filter from its event log, so the
// first reconcile pass after a restart does not announce a state the
// previous run announced; a changed state still goes through.
func TestSVC26QuietSeededFromTheLog(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	serving := messages.Event{Kind: messages.KindStackServing, Stack: "web", Message: "serving: api 3/3", Fingerprint: "serving"}
	down := messages.Event{Kind: messages.KindReplicaLimit, Stack: "web", Service: "api", Instance: "web-api-1-ab", Fingerprint: "left down by its restart policy"}
	if _, err := j.Append(serving, down, messages.Event{Kind: messages.KindConfigReloaded, Message: "config reloaded"}); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: logging.New(io.Discard, "json", zerolog.InfoLevel)}
	out := &sinkLog{}
	q := d.quietEvents(j, out)
	q.Emit(serving)
	q.Emit(down)
	failed := messages.Event{Kind: messages.KindStackFailed, Stack: "web", Message: "failed: api failing", Fingerprint: "failed"}
	q.Emit(failed)
	if len(out.evs) != 1 || out.evs[0].Kind != messages.KindStackFailed {
		t.Fatalf("announced %+v, want only stack.failed", out.evs)
	}
}

// BenchmarkSVC26QuietSeed measures the boot cost of seeding the quiet
// filter from a full window of the event log (quietSeed events).
func BenchmarkSVC26QuietSeed(b *testing.B) {
	j, err := journal.Open(journal.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	batch := make([]messages.Event, 0, 1000)
	for i := 0; i < quietSeed; i++ {
		batch = append(batch, messages.Event{Kind: messages.KindReplicaRestarted, Stack: "web", Service: "api",
			Instance: "web-api-1-ab", Message: "restarted by engenho; running again (restart 2)"})
		if len(batch) == cap(batch) {
			if _, err := j.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	d := &Daemon{log: logging.New(io.Discard, "json", zerolog.InfoLevel)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.quietEvents(j, &sinkLog{})
	}
}
