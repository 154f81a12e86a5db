package journal

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// REL-3, REL-5 (open defect, this test fails): a record large enough for
// badger's value log (a stack's rendered definitions, 32 KiB or more)
// written while the disk fails leaves a hole in the value log: its pages
// never reach the disk, and the failed commit and its undo both write
// there. Resync retires the write-ahead log but not the value log. At the
// next start the journal's Check finds the hole followed by good entries
// and reports the journal damaged, and badger's Open cuts the last value
// log at the hole, so the stack's record points at data that is gone.
func TestAFailedWriteOfALargeRecordLeavesTheJournalWhole(t *testing.T) {
	j, f := openOnFaultFS(t)
	first, err := j.RecordDeployment("big", Deployment{Definition: bigDefinition, Source: "socket"})
	if err != nil {
		t.Fatal(err)
	}
	failWrites(t, f, true)
	other := json.RawMessage(`{"y":"` + strings.Repeat("b", 40<<10) + `"}`)
	if _, err := j.RecordDeployment("big", Deployment{Definition: other, Source: "socket"}); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("deploy during the failure: %v, want ErrWriteFailed", err)
	}
	failWrites(t, f, false)
	if _, err := j.RecordDeployment("later", Deployment{Definition: other, Source: "socket"}); err != nil {
		t.Fatalf("deploy once the disk writes again: %v", err)
	}
	crashed := filepath.Join(t.TempDir(), "journal")
	copyDir(t, filepath.Join(f.Backing(), "journal"), crashed)
	if _, err := Check(Options{Dir: crashed}); err != nil {
		t.Errorf("the next start's check: %v", err)
	}
	cj, _ := openTest(t, crashed, nil)
	for stack, want := range map[string]uint64{"big": first.Current.ID, "later": 1} {
		st, found, err := cj.Stack(stack)
		if err != nil || !found || st.Current.ID != want {
			t.Errorf("after a crash, stack %s: deployment %d, found %v, err %v; want deployment %d", stack, st.Current.ID, found, err, want)
		}
	}
}
