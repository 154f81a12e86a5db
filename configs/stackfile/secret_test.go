package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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

// The journal keeps secrets (Marshal); a redacted dump cannot pass for a
// journal record (Unmarshal refuses it).
func TestSecretsJournalRoundTripSEC2(t *testing.T) {
	st := mustParse(t, "s.yaml", secretStack)
	data, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"PW":{"value":"`+secretValue+`","secret":true}`)) {
		t.Fatalf("journal form lost the secret: %s", data)
	}
	back, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if v := back.Services["api"].Env["PW"]; !v.IsSecret() || v.Reveal() != secretValue {
		t.Fatal("secret did not survive the journal")
	}
	if back.Services["api"].Revision() != st.Services["api"].Revision() {
		t.Fatal("revision changed through the journal")
	}
	// The caller's stack was not marked for revealing by Marshal.
	if j, _ := json.Marshal(st.Services["api"]); bytes.Contains(j, []byte(secretValue)) {
		t.Fatal("Marshal changed the caller's stack")
	}
	// A status dump (json.Marshal of the redacted or plain stack).
	dump, _ := json.Marshal(journalRecord{Format: journalFormat, Stack: st.Redacted()})
	if _, err := Unmarshal(dump); !errors.Is(err, errRedactedSecret) {
		t.Fatalf("a redacted dump was read back: %v", err)
	}
	if r := st.Redacted().Services["api"].Env["PW"]; !r.IsSecret() || !r.IsRedacted() || r.Reveal() != "" {
		t.Fatal("Redacted keeps the mark and drops the value")
	}
}
