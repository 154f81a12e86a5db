package daemonconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers"
)

// FuzzLoad (REL-2): the config parser never panics; a rejected file gives
// an error naming the file; an accepted one dumps (String) to YAML that
// loads back to the same config, with its secrets redacted.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"../../configs/demo.yaml", "../../configs/engenho.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// Without the comment lines: a small seed keeps the fuzzer's
		// minimisation of new inputs short.
		var keep []string
		for _, line := range strings.Split(string(b), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				keep = append(keep, line)
			}
		}
		f.Add([]byte(strings.Join(keep, "\n")))
	}
	for _, s := range []string{
		"{}", "", "~", "- a", "log: {level: debug}\n", "log: debug",
		"objstore: {kind: s3, s3: {bucket: b, access_key: a, secret_key: s}}",
		"stacks: ['*.yaml', stacks/demo.yaml]", "a: &x {b: *x}", "log: &l {level: info}\nchaos: *l",
		"supervision: {ladder: {delays: [1s, 2m], jitter: 0.1}}", "control: {max_request: 10MiB}",
		"edge: {listen: ':80'}\nmetrics: {listen: ':80'}", "log:\n  level: info\n  level: info",
		"node: {name: \"\\u0000\"}", "\"\\xff\": 1", "? [a]\n: b", "--- {}\n--- {}",
		// Input errors (issue 13): every stage at once, duplicates, long
		// keys and values, durations out of range.
		"log: {level: loud, bogus: 1}\nsweep: {interval: 99999999999h}\nprobe: {timeout: 1e400s}\nstacks: [nope.yaml]",
		"edge: {listen: x}\nedge: {listen: ':1'}", "log:\n  level: info\n  format: json\n  level: debug",
		strings.Repeat("k", 1100) + ": 1", "node: {name: " + strings.Repeat("n", 300) + "}",
		"drain: {budget: -99999999999h}", "supervision: {ladder: {delays: [87600h, 87601h]}}",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	writeFile(f, dir, "stacks/demo.yaml", "name: demo\n")
	path := filepath.Join(dir, "engenho.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(path, data, Overrides{})
		if err != nil {
			if c != nil {
				t.Fatal("an error and a config")
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		dump := c.String()
		for _, s := range []drivers.Secret{c.Objstore.S3.SecretKey, c.Objstore.S3.SessionToken} {
			if len(s) > len(drivers.Redacted) && strings.Contains(dump, s.Reveal()) {
				t.Fatalf("String shows a secret:\n%s", dump)
			}
		}
		again, err := parse(path, []byte(dump), Overrides{})
		if err != nil {
			t.Fatalf("the dump does not load: %v\n%s", err, dump)
		}
		if ch := Diff(c.Redacted(), again); !ch.Empty() {
			t.Fatalf("the dump loads differently: %s\n%s", ch, dump)
		}
	})
}
