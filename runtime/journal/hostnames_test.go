package journal

import (
	"errors"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
)

// ACT-10, SEC-3: due times and owed releases are kept by host name, which
// is a DNS name (hibernate.host, e.g. notes.example.com); anything that is
// not one, or could escape a key, is refused.
func TestHostNamesAreDNSNames(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	at := epoch.Add(time.Hour)
	noErr(t, j.SetDue("notes.example.com", at))
	noErr(t, j.OweRelease(messages.OwedRelease{Host: "a-1.b.localhost", Epoch: "3", ETag: "e"}))
	if d, found := must2(j.Due("notes.example.com")); !found || !d.At.Equal(at) {
		t.Fatalf("due of a dotted host: %+v %v", d, found)
	}
	if settled := must(j.SettleRelease("a-1.b.localhost", "3")); !settled {
		t.Fatal("owed release of a dotted host not settled")
	}
	for _, bad := range []string{"", "Notes.example.com", "a..b", ".a", "a.", "-a.b", "a/b", "a.b/../c", "a_b"} {
		if err := j.SetDue(bad, at); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetDue(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
