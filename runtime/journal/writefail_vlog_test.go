package journal

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// REL-3, REL-5: a record large enough for badger's value log (a stack's
// rendered definitions, 32 KiB or more) written while the disk fails left
// a hole in the value log: its pages never reached the disk, and the
// failed commit and its undo both write there, while the value log stays
// in use after the resync. The next start's Check found the hole followed
// by good entries and reported the journal damaged, and badger's Open cut
// the last value log at the hole. The resync now writes the logs back
// from the page cache first (rewriteLogs); without it this test fails.
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
