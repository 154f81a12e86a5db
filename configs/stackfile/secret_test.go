package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/engenho/engenho/runtime/nodekey"
)

const secretValue = "hunter2-very-secret"

const secretStack = `name: s
services:
  api:
    command: [/bin/api]
    env:
      PW: {value: hunter2-very-secret, secret: true}
      LISTED: plain
    sidecars:
      - {name: job, command: [/bin/job], env: [TOKEN=hunter2-very-secret]}
    x-engenho: {secret_env: [TOKEN]}
`

// SEC-2: a secret env value appears in no printable form: fmt with any
// verb (of the value, the env, the service, the stack), String, JSON,
// YAML, Redacted, the plan. Only Reveal and InstanceSpec hold it.
func TestSecretsNeverPrintSEC2(t *testing.T) {
	st := mustParse(t, "s.yaml", secretStack)
	svc := st.Services["api"]
	v := svc.Env["PW"]
	printed := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10s", "%-v"} {
		printed["value "+verb] = fmt.Sprintf(verb, v)
		printed["env "+verb] = fmt.Sprintf(verb, svc.Env)
		printed["service "+verb] = fmt.Sprintf(verb, svc)
		printed["stack "+verb] = fmt.Sprintf(verb, *st)
		printed["sidecar "+verb] = fmt.Sprintf(verb, svc.Sidecars)
	}
	printed["String"] = v.String() + svc.String() + st.String()
	printed["Println"] = fmt.Sprintln(v, svc.Env, &svc)
	j, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	printed["json.Marshal"] = string(j)
	js, _ := json.Marshal(st)
	printed["json.Marshal stack"] = string(js)
	y, err := yaml.Marshal(svc.Env)
	if err != nil {
		t.Fatal(err)
	}
	printed["yaml.Marshal"] = string(y)
	printed["Redacted"] = fmt.Sprintf("%#v %v", svc.Redacted(), svc.Redacted().Env.Reveal())
	printed["plan"] = FormatPlan(Plan(nil, st))
	for where, text := range printed {
		if strings.Contains(text, secretValue) || strings.Contains(text, fmt.Sprintf("%x", secretValue)) {
			t.Errorf("%s shows the secret: %s", where, text)
		}
	}
	if !strings.Contains(printed["json.Marshal"], `"PW":{"secret":true,"redacted":true}`) {
		t.Errorf("json form does not mark the secret: %s", printed["json.Marshal"])
	}
	if !strings.Contains(printed["value %v"], Redaction) || !strings.Contains(printed["env %+v"], "plain") {
		t.Error("plain values print, secrets print as the redaction")
	}
	// It is still there for the driver.
	if v.Reveal() != secretValue || svc.Sidecars[0].Env["TOKEN"].Reveal() != secretValue {
		t.Error("Reveal lost the value")
	}
	spec := InstanceSpec(svc, Instance{Stack: "s", Slot: 1, ID: "x"})
	if spec.Env["PW"] != secretValue {
		t.Error("InstanceSpec must carry the real value")
	}
}

// SEC-2: parse errors about env values never quote the value.
func TestSecretsNotInParseErrorsSEC2(t *testing.T) {
	srcs := []string{
		"services:\n  a:\n    command: x\n    env: PASSWORD=" + secretValue + "\n",
		"services:\n  a:\n    command: x\n    env: {PW: {value: " + secretValue + ", secret: nope}}\n",
		"services:\n  a:\n    command: x\n    env: {PW: {value: [" + secretValue + "], secret: true}}\n",
		"services:\n  a:\n    command: x\n    env: {PW: {value: " + secretValue + ", secret: true, extra: 1}}\n",
		"services:\n  a:\n    command: x\n    env: [\"BAD NAME=" + secretValue + "\"]\n",
		"services:\n  a:\n    command: x\n    env: [{PW: " + secretValue + "}]\n",
		"services:\n  a:\n    command: x\n    env: [PW=" + secretValue + ", PW=" + secretValue + "]\n",
		"services:\n  a:\n    command: x\n    env: {PW: [" + secretValue + "]}\n",
	}
	for _, src := range srcs {
		_, err := Parse("s.yaml", []byte(src))
		if err == nil {
			t.Errorf("accepted:\n%s", src)
			continue
		}
		if strings.Contains(err.Error(), secretValue) {
			t.Errorf("error quotes the value: %v", err)
		}
	}
}

// SEC-2: the journal form keeps secrets only sealed under the node key,
// never in plaintext; it reads back (with the key) to the same values and
// the same revisions, and writes the same bytes again; without the key,
// or with another node's, it neither writes nor reads; a redacted dump
// cannot pass for a journal record (Unmarshal refuses it).
func TestSecretsJournalSealedSEC2(t *testing.T) {
	st := mustParse(t, "s.yaml", secretStack)
	if err := st.BindSecrets(testKey); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(st, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secretValue)) {
		t.Fatalf("journal form holds the secret in plaintext: %s", data)
	}
	if !bytes.Contains(data, []byte(`"PW":{"secret":true,"sealed":"v1:`)) || !bytes.Contains(data, []byte(`"TOKEN":{"secret":true,"sealed":"v1:`)) {
		t.Fatalf("journal form lost a secret: %s", data)
	}
	back, err := Unmarshal(data, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if v := back.Services["api"].Env["PW"]; !v.IsSecret() || v.Reveal() != secretValue {
		t.Fatal("secret did not survive the journal")
	}
	if v := back.Services["api"].Sidecars[0].Env["TOKEN"]; !v.IsSecret() || v.Reveal() != secretValue {
		t.Fatal("sidecar secret did not survive the journal")
	}
	if back.Services["api"].Revision() != st.Services["api"].Revision() {
		t.Fatal("revision changed through the journal")
	}
	if sc := back.Services["api"].Sidecars[0]; back.Services["api"].SidecarRevision(sc) != st.Services["api"].SidecarRevision(st.Services["api"].Sidecars[0]) {
		t.Fatal("sidecar revision changed through the journal")
	}
	if again, err := Marshal(back, testKey); err != nil || !bytes.Equal(again, data) {
		t.Fatalf("a record read back writes other bytes (%v)", err)
	}
	// Each fresh seal has its own nonce: no two records of one secret match.
	if other, _ := Marshal(st, testKey); bytes.Equal(other, data) {
		t.Fatal("two seals of the same value are equal: the nonce is not random")
	}
	if _, err := Marshal(st, nil); !errors.Is(err, ErrNoNodeKey) {
		t.Fatalf("Marshal without a key: %v", err)
	}
	if _, err := Unmarshal(data, nil); !errors.Is(err, ErrNoNodeKey) {
		t.Fatalf("Unmarshal without a key: %v", err)
	}
	otherKey, _ := nodekey.New(bytes.Repeat([]byte{8}, 32))
	if _, err := Unmarshal(data, otherKey); !errors.Is(err, nodekey.ErrWrongKey) {
		t.Fatalf("Unmarshal with another node's key: %v", err)
	}
	// The caller's stack was not changed by Marshal.
	if j, _ := json.Marshal(st.Services["api"]); bytes.Contains(j, []byte(secretValue)) || bytes.Contains(j, []byte("sealed")) {
		t.Fatal("Marshal changed the caller's stack")
	}
	// A status dump (json.Marshal of the redacted or plain stack).
	dump, _ := json.Marshal(journalRecord{Format: journalFormat, Stack: st.Redacted()})
	if _, err := Unmarshal(dump, testKey); !errors.Is(err, errRedactedSecret) {
		t.Fatalf("a redacted dump was read back: %v", err)
	}
	if r := st.Redacted().Services["api"].Env["PW"]; !r.IsSecret() || !r.IsRedacted() || r.Reveal() != "" {
		t.Fatal("Redacted keeps the mark and drops the value")
	}
}

// SEC-2: bound to the node key, a revision hashes the key's digest of a
// secret, not the secret: it differs from the unbound (plain hash)
// revision and between two nodes' keys, so a revision seen in status
// cannot be tested against guesses of even a short secret; it is still
// stable for one key and changes when the secret is rotated.
func TestRevisionKeyedDigestSEC2(t *testing.T) {
	src := "services:\n  a:\n    command: x\n    env: {PW: {value: \"1234\", secret: true}}\n"
	rev := func(key NodeKey, yamlSrc string) string {
		st := mustParse(t, "s.yaml", yamlSrc)
		if key != nil {
			if err := st.BindSecrets(key); err != nil {
				t.Fatal(err)
			}
		}
		return st.Services["a"].Revision()
	}
	other, _ := nodekey.New(bytes.Repeat([]byte{9}, 32))
	unbound, bound, bound2, otherNode := rev(nil, src), rev(testKey, src), rev(testKey, src), rev(other, src)
	if bound != bound2 {
		t.Fatal("a bound revision is not stable")
	}
	if bound == unbound || bound == otherNode {
		t.Fatalf("the revision does not depend on the key: unbound %s, bound %s, other node %s", unbound, bound, otherNode)
	}
	if rotated := rev(testKey, strings.Replace(src, "1234", "1235", 1)); rotated == bound {
		t.Fatal("rotating the secret kept the revision")
	}
	// Guessing: hashing each candidate without the key never meets the
	// bound revision.
	for _, guess := range []string{"0000", "1233", "1234", "1235"} {
		if rev(nil, strings.Replace(src, "1234", guess, 1)) == bound {
			t.Fatalf("guess %s matches the keyed revision", guess)
		}
	}
}

// SEC-2, SVC-23: Canonical gives the same bytes for the same definition
// on this node, whether just parsed (a seal would have a fresh nonce each
// time) or read back from the journal, never holds the secret nor a seal,
// changes with the secret and with the key, and needs the key for a stack
// with secrets. A stack without secrets gives Marshal's bytes.
func TestCanonicalIsStableAndSealsNothingSEC2(t *testing.T) {
	first, err := Canonical(mustParse(t, "s.yaml", secretStack), testKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(first, []byte(secretValue)) || bytes.Contains(first, []byte("sealed")) {
		t.Fatalf("canonical form holds the secret or a seal: %s", first)
	}
	st := mustParse(t, "s.yaml", secretStack)
	if again, _ := Canonical(st, testKey); !bytes.Equal(again, first) {
		t.Fatal("two parses of one file give other canonical bytes")
	}
	if st.Services["api"].Env["PW"].digest != "" {
		t.Fatal("Canonical bound the caller's stack")
	}
	data, err := Marshal(st, testKey)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Canonical(back, testKey); !bytes.Equal(got, first) {
		t.Fatal("the canonical form changed through the journal")
	}
	rotated := mustParse(t, "s.yaml", strings.ReplaceAll(secretStack, secretValue, secretValue+"-rotated"))
	if got, _ := Canonical(rotated, testKey); bytes.Equal(got, first) {
		t.Fatal("a rotated secret gives the same canonical bytes")
	}
	otherKey, _ := nodekey.New(bytes.Repeat([]byte{8}, 32))
	if got, _ := Canonical(st, otherKey); bytes.Equal(got, first) {
		t.Fatal("another node's key gives the same canonical bytes")
	}
	if _, err := Canonical(st, nil); !errors.Is(err, ErrNoNodeKey) {
		t.Fatalf("Canonical of a stack with secrets without a key: %v", err)
	}
	plain := mustParse(t, "p.yaml", "name: p\nservices:\n  a:\n    command: [\"/bin/a\"]\n    env: {X: \"1\"}\n")
	c, err := Canonical(plain, nil)
	m, merr := Marshal(plain, nil)
	if err != nil || merr != nil || !bytes.Equal(c, m) {
		t.Fatalf("a stack without secrets: Canonical %s (%v), Marshal %s (%v)", c, err, m, merr)
	}
}
