package stackfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// roundTrip writes st to its journal form and reads it back, checking the
// read-back stack writes the same bytes again. It binds st to testKey
// first, as the daemon binds every stack, so the two plan as unchanged.
func roundTrip(t *testing.T, st *Stack) *Stack {
	t.Helper()
	if err := st.BindSecrets(testKey); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(st, testKey)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data, testKey)
	if err != nil {
		t.Fatalf("Unmarshal(Marshal, testKey): %v\n%s", err, data)
	}
	again, err := Marshal(back, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatalf("not canonical:\n%s\n%s", data, again)
	}
	return back
}

// The journal form is canonical: the same stack gives the same bytes.
func TestMarshalCanonical(t *testing.T) {
	a := mustParse(t, "s.yaml", "services:\n  a: {command: x, env: {B: '2', A: '1'}}\n  b: {command: y}\n")
	b := mustParse(t, "s.yaml", "services:\n  a: {env: [A=1, B=2], command: [x]}\n  b: {command: y}\n")
	da, _ := Marshal(a, testKey)
	db, _ := Marshal(b, testKey)
	if !bytes.Equal(da, db) {
		t.Fatalf("equal stacks, different bytes:\n%s\n%s", da, db)
	}
	roundTrip(t, a)
}

// Unmarshal checks what it reads: a corrupt or invalid record is an
// error, never a half-read stack.
func TestUnmarshalRefuses(t *testing.T) {
	good, _ := Marshal(mustParse(t, "s.yaml", "services:\n  a: {command: x}\n"), testKey)
	cases := map[string]string{
		"not json":        "{",
		"trailing":        string(good) + " {}",
		"other format":    strings.Replace(string(good), `"format":1`, `"format":2`, 1),
		"no stack":        `{"format":1}`,
		"unknown field":   strings.Replace(string(good), `"order"`, `"extra":1,"order"`, 1),
		"bad name":        strings.Replace(string(good), `"name":"s"`, `"name":"../s"`, 1),
		"bad replicas":    strings.Replace(string(good), `"replicas":1`, `"replicas":-1`, 1),
		"order mismatch":  strings.Replace(string(good), `"order":["a"]`, `"order":["a","b"]`, 1),
		"bad probe kind":  strings.Replace(string(good), `"kind":"none"`, `"kind":"magic"`, 1),
		"bad env value":   strings.Replace(string(good), `"name":"a"`, `"env":{"A":{"secret":false}},"name":"a"`, 1),
		"redacted secret": strings.Replace(string(good), `"name":"a"`, `"env":{"A":{"secret":true,"redacted":true}},"name":"a"`, 1),
	}
	for name, data := range cases {
		if data == string(good) {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if st, err := Unmarshal([]byte(data), testKey); err == nil {
			t.Errorf("%s: accepted %v", name, st)
		}
	}
	if _, err := Marshal(nil, testKey); err == nil {
		t.Error("Marshal(nil, testKey) accepted")
	}
}

// genService draws a valid service as YAML in one of several equivalent
// renderings, together with a canonical rendering of the same service.
func genServiceYAML(t *rapid.T, name string) (variant, canonical string) {
	words := rapid.SliceOfN(rapid.StringMatching(`[a-z/][a-z0-9/._-]{0,8}`), 1, 4).Draw(t, "argv")
	keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[A-Z][A-Z0-9_]{0,5}`), 0, 4, rapid.ID[string]).Draw(t, "env keys")
	vals := make([]string, len(keys))
	for i := range keys {
		vals[i] = rapid.StringMatching(`[a-zA-Z0-9 ./:=@-]{0,12}`).Draw(t, "env value")
	}
	secret := rapid.SliceOfN(rapid.Bool(), len(keys), len(keys)).Draw(t, "secret")
	replicas := rapid.IntRange(0, 20).Draw(t, "replicas")
	target := rapid.IntRange(1, 65535).Draw(t, "target")
	published := rapid.IntRange(0, 65535).Draw(t, "published")
	probe := rapid.SampledFrom([]string{"none", "exec", "http", "tcp"}).Draw(t, "probe")
	interval := rapid.IntRange(1, 120).Draw(t, "interval")

	render := func(alt bool) string {
		var b strings.Builder
		fmt.Fprintf(&b, "  %s:\n", name)
		if alt {
			fmt.Fprintf(&b, "    command: %q\n", strings.Join(words, " "))
		} else {
			fmt.Fprintf(&b, "    command: [%s]\n", quoteList(words))
		}
		if len(keys) > 0 {
			b.WriteString("    env:\n")
			var marked []string
			for i, k := range keys {
				switch {
				case alt && secret[i]:
					fmt.Fprintf(&b, "      %s: {value: %q, secret: true}\n", k, vals[i])
				case secret[i]:
					fmt.Fprintf(&b, "      %s: %q\n", k, vals[i])
					marked = append(marked, k)
				default:
					fmt.Fprintf(&b, "      %s: %q\n", k, vals[i])
				}
			}
			if len(marked) > 0 {
				fmt.Fprintf(&b, "    x-engenho: {secret_env: [%s]}\n", strings.Join(marked, ", "))
			}
		}
		switch {
		case published > 0 && alt:
			fmt.Fprintf(&b, "    ports: [{target: %d, published: %d}]\n", target, published)
		case published > 0:
			fmt.Fprintf(&b, "    ports: [\"0.0.0.0:%d:%d\"]\n", published, target)
		case alt:
			fmt.Fprintf(&b, "    ports: [%d]\n", target)
		default:
			fmt.Fprintf(&b, "    ports: [\"%d/tcp\"]\n", target)
		}
		switch probe {
		case "exec":
			if alt {
				fmt.Fprintf(&b, "    healthcheck: {test: \"check\", interval: %ds}\n", interval)
			} else {
				fmt.Fprintf(&b, "    healthcheck: {test: [CMD, /bin/sh, -c, check], interval: %ds, retries: 3}\n", interval)
			}
		case "http":
			fmt.Fprintf(&b, "    healthcheck: {http: {path: /h, port: %d}, interval: %ds}\n", target, interval)
		case "tcp":
			fmt.Fprintf(&b, "    healthcheck: {tcp: {}, interval: %ds}\n", interval)
		case "none":
			if alt {
				b.WriteString("    healthcheck: {test: NONE}\n")
			}
		}
		if alt || replicas != 1 {
			fmt.Fprintf(&b, "    deploy: {replicas: %d}\n", replicas)
		}
		return b.String()
	}
	return render(true), render(false)
}

func quoteList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return strings.Join(q, ", ")
}

// SVC-3 (property): two renderings of the same service parse to the same
// definition (same journal bytes, same revision), and the journal round
// trip preserves it exactly.
func TestPropertyRenderingsAgreeSVC3(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alt, canon := genServiceYAML(t, "svc")
		a, err := Parse("p.yaml", []byte("services:\n"+alt))
		if err != nil {
			t.Fatalf("alt rendering: %v\n%s", err, alt)
		}
		b, err := Parse("p.yaml", []byte("services:\n"+canon))
		if err != nil {
			t.Fatalf("canonical rendering: %v\n%s", err, canon)
		}
		if ra, rb := a.Services["svc"].Revision(), b.Services["svc"].Revision(); ra != rb {
			t.Fatalf("revisions differ %s %s\n%s\n%s", ra, rb, alt, canon)
		}
		if err := a.BindSecrets(testKey); err != nil {
			t.Fatal(err)
		}
		if err := b.BindSecrets(testKey); err != nil {
			t.Fatal(err)
		}
		// Sealing uses a random nonce: compare the forms with each
		// secret's keyed digest in place of its sealed value.
		if ca, cb := compared(t, a), compared(t, b); !bytes.Equal(ca, cb) {
			t.Fatalf("definitions differ:\n%s\n%s", ca, cb)
		}
		da, _ := Marshal(a, testKey)
		back, err := Unmarshal(da, testKey)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := Marshal(back, testKey); !bytes.Equal(again, da) {
			t.Fatal("round trip changed the definition")
		}
		for _, c := range Plan(a, back) {
			if c.Action != ActionUnchanged {
				t.Fatalf("plan after round trip: %s", c)
			}
		}
	})
}

// compared is st's JSON with each secret as its digest: the canonical
// form, with what sealing randomizes taken out.
func compared(t interface{ Fatal(...any) }, st *Stack) []byte {
	out := st.Clone()
	for name, svc := range out.Services {
		out.Services[name] = svc.forCompare()
	}
	b, err := json.Marshal(journalRecord{Format: journalFormat, Stack: out})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
