package datadir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
)

// TestLayout: one place knows the layout (DMN-1, DMN-2, DMN-11, DMN-14).
func TestLayout(t *testing.T) {
	d, _ := openTemp(t)
	r := d.Root()
	for got, want := range map[string]string{
		d.Control():       r + "/control",
		d.LockPath():      r + "/control/lock",
		d.RunMarkerPath(): r + "/control/run.json",
		d.HoldPath():      r + "/control/hold",
		d.Socket():        r + "/control/engenho.sock",
		d.Journal():       r + "/journal",
		d.Instances():     r + "/instances",
		d.Logs():          r + "/logs",
		d.Hosts():         r + "/hosts",
		d.Attic():         r + "/attic",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if !filepath.IsAbs(r) {
		t.Errorf("root %s is not absolute", r)
	}
}

// TestOpenControlDirMode: control/ is 0700, tightened if it existed wider.
func TestOpenControlDirMode(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "control"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root, clock.New())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.Control())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("control mode %v, %v", fi.Mode(), err)
	}
	fresh, err := Open(filepath.Join(root, "new", "data"), clock.New())
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh.Control()); fi.Mode().Perm() != 0o700 {
		t.Fatalf("new control mode %v", fi.Mode())
	}
}

func TestOpenRejectsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(f, clock.New()); err == nil {
		t.Fatal("opened a file as a data directory")
	}
	if _, err := Open("", clock.New()); err == nil {
		t.Fatal("opened an empty path")
	}
}

// TestPreviousRunFirst: no marker means first run (DMN-3).
func TestPreviousRunFirst(t *testing.T) {
	d, _ := openLocked(t)
	p, err := d.PreviousRun()
	if err != nil || p.Outcome != OutcomeFirst || p.Marker != nil {
		t.Fatalf("got %+v, %v", p, err)
	}
}

// TestPreviousRunClean: a run that marked itself released was clean (DMN-3).
func TestPreviousRunClean(t *testing.T) {
	d, clk := openLocked(t)
	if err := d.MarkLive("running"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := d.MarkReleased(); err != nil {
		t.Fatal(err)
	}
	d.Unlock()

	next, err := Open(d.Root(), clk)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Lock(); err != nil {
		t.Fatal(err)
	}
	defer next.Unlock()
	p, err := next.PreviousRun()
	if err != nil || p.Outcome != OutcomeClean {
		t.Fatalf("got %+v, %v", p, err)
	}
	if p.Marker.Pid != os.Getpid() || !p.Marker.StartedAt.Equal(t0) || !p.Marker.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("marker %+v", p.Marker)
	}
}

// TestPreviousRunCrashed: a process killed while live leaves a live marker;
// the next run reports a crash naming its pid and phase (DMN-3).
func TestPreviousRunCrashed(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir)
	pid := h.cmd.Process.Pid
	h.kill(t)

	d, err := Open(dir, clock.New())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Lock(); err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	defer d.Unlock()
	p, err := d.PreviousRun()
	if err != nil || p.Outcome != OutcomeCrashed {
		t.Fatalf("got %+v, %v", p, err)
	}
	if p.Marker.Pid != pid || p.Marker.Phase != "adopt" || p.Marker.State != RunLive {
		t.Fatalf("marker %+v, want live pid %d phase adopt", p.Marker, pid)
	}
	if !strings.Contains(p.Detail, "adopt") {
		t.Fatalf("detail %q", p.Detail)
	}
}

// TestPreviousRunUnreadable: a marker that does not parse counts as a
// crash, with the reason in the detail.
func TestPreviousRunUnreadable(t *testing.T) {
	d, _ := openLocked(t)
	for _, content := range []string{"{not json", `{"state":"sleeping","pid":3}`} {
		os.WriteFile(d.RunMarkerPath(), []byte(content), 0o600)
		p, err := d.PreviousRun()
		if err != nil || p.Outcome != OutcomeCrashed || !strings.Contains(p.Detail, "unreadable") {
			t.Fatalf("%q: got %+v, %v", content, p, err)
		}
	}
}

// TestMarkersAreAtomic: marker writes leave no temp file behind, are 0600,
// and a crashed write's temp file is cleaned when the lock is next taken.
func TestMarkersAreAtomic(t *testing.T) {
	d, _ := openLocked(t)
	for _, phase := range []string{"resolve_config", "open_journal", "adopt"} {
		if err := d.MarkLive(phase); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetHold(); err != nil {
		t.Fatal(err)
	}
	m, found, err := d.ReadRunMarker()
	if err != nil || !found || m.Phase != "adopt" || m.State != RunLive {
		t.Fatalf("marker %+v, %v, %v", m, found, err)
	}
	entries, _ := os.ReadDir(d.Control())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if fi, _ := e.Info(); e.Type().IsRegular() && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", e.Name(), fi.Mode())
		}
	}
	if got := strings.Join(names, ","); got != "hold,lock,run.json" {
		t.Fatalf("control holds %s", got)
	}

	stale := filepath.Join(d.Control(), tempPrefix+"run.json-123")
	os.WriteFile(stale, []byte("{"), 0o600)
	d.Unlock()
	if err := d.Lock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file kept: %v", err)
	}
}

// TestHoldMarker: set, present, kept on a second set, cleared (DMN-4).
func TestHoldMarker(t *testing.T) {
	d, clk := openLocked(t)
	if held, err := d.HoldPresent(); err != nil || held {
		t.Fatalf("fresh: %v, %v", held, err)
	}
	if err := d.SyncHold(true); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(d.HoldPath())
	clk.Advance(time.Hour)
	if err := d.SetHold(); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(d.HoldPath())
	if string(first) != string(second) || !strings.Contains(string(first), "2026-03-04T05:06:07") {
		t.Fatalf("marker rewritten or wrong: %s / %s", first, second)
	}
	if held, err := d.HoldPresent(); err != nil || !held {
		t.Fatalf("after set: %v, %v", held, err)
	}
	if err := d.SyncHold(false); err != nil {
		t.Fatal(err)
	}
	if err := d.ClearHold(); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
	if held, _ := d.HoldPresent(); held {
		t.Fatal("still held after clear")
	}
}
