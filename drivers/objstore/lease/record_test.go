package lease

import (
	"strings"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	r := held(me, 9, t0.Add(123456789))
	r.Released = true
	got, err := Decode(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got != r {
		t.Fatalf("round trip %+v, want %+v", got, r)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := string(held(me, 1, t0).Encode())
	cases := map[string]string{
		"not json":      "lease",
		"version 2":     strings.Replace(good, `"v":1`, `"v":2`, 1),
		"epoch 0":       strings.Replace(good, `"epoch":1`, `"epoch":0`, 1),
		"no holder":     strings.Replace(good, `"holder":"node-a/1"`, `"holder":""`, 1),
		"bad node":      strings.Replace(good, `"node":"node-a"`, `"node":"../etc"`, 1),
		"ttl 0":         strings.Replace(good, `"ttl_ms":30000`, `"ttl_ms":0`, 1),
		"ttl huge":      strings.Replace(good, `"ttl_ms":30000`, `"ttl_ms":99999999999`, 1),
		"no expiry":     strings.Replace(good, `"expiry":"2026-01-02T03:04:05Z",`, ``, 1),
		"trailing data": good + `{}`,
		"too big":       good[:len(good)-2] + `,"x":"` + strings.Repeat("a", 5000) + `"}`,
		"control char":  strings.Replace(good, `node-a/1`, `node-a/\u0001`, 1),
	}
	for name, data := range cases {
		if _, err := Decode([]byte(data)); err == nil {
			t.Errorf("%s: decoded %q", name, data)
		}
	}
	if _, err := Decode([]byte(good)); err != nil {
		t.Fatalf("good record rejected: %v", err)
	}
}

// REL-2: the lease record decoder never panics, and whatever it accepts
// re-encodes to a record it decodes identically.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(held(me, 1, t0).Encode())
	rel := held(them, 42, t0.Add(time.Hour))
	rel.Released = true
	f.Add(rel.Encode())
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"holder":"h","node":"n","epoch":18446744073709551615,"expiry":"9999-12-31T23:59:59Z","ttl_ms":1}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Decode(r.Encode())
		if err != nil {
			t.Fatalf("accepted %q but not its re-encoding: %v", data, err)
		}
		if again != r {
			t.Fatalf("re-encoding changed the record: %+v vs %+v", again, r)
		}
	})
}
