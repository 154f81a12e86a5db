package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/nodekey"
)

// ovSecretStack is ovStack with a secret env value in api.
func ovSecretStack(replicas int, version, secret string) string {
	return strings.Replace(ovStack(replicas, version), `env: {VERSION:`,
		fmt.Sprintf(`env: {PW: {value: %q, secret: true}, VERSION:`, secret), 1)
}

// SVC-23, SEC-2: the declaration digest of a stack with a secret env
// value is the same at every reload of the unchanged file, although each
// parse seals the secret with a fresh nonce, and after a restart: a reload
// must not look like an edit, or it would drop the operator's overrides.
// So a scale holds through reloads and a restart, and a rollback holds
// while the file is the one it rolled back from; rotating the secret is an
// edit (the rollback ends). The canonical form the digest hashes holds the
// node key's digest of the secret, never the secret.
func TestSVC23SecretStackDigestIsStable(t *testing.T) {
	const secret, rotated = "hunter2-0f3a9c", "rotated-77d1e2"
	r := newRig(t, t.TempDir())
	r.apply(ovSecretStack(3, "v1", secret), false)
	declared := func() string {
		t.Helper()
		st, _, err := r.j.Stack("web")
		if err != nil || st.Declared == nil {
			t.Fatalf("stack web: %+v %v", st, err)
		}
		return st.Declared.Digest
	}
	first := declared()
	if _, err := r.d.Scale("web", "api", 5, rootUser); err != nil {
		t.Fatal(err)
	}
	r.takeEvents()
	for i := range 2 {
		if a := r.apply(ovSecretStack(3, "v1", secret), false); !onlyUnchanged(a) || !hasNote(a, "replicas 5 kept") {
			t.Fatalf("reload %d of the unchanged file: %+v", i, a)
		}
		if got := declared(); got != first {
			t.Fatalf("reload %d: the declaration digest moved from %s to %s", i, first, got)
		}
		r.wantRunning("api", 5, "1")
		if evs := r.takeEvents(); len(evs) != 0 {
			t.Fatalf("reload %d announced %+v", i, evs)
		}
		r = r.restart()
	}

	// A rollback holds while the file is the one it rolled back from.
	r.apply(ovSecretStack(3, "v2", secret), false)
	r.wantRunning("api", 5, "2")
	if _, err := r.d.Rollback("web", rootUser); err != nil {
		t.Fatal(err)
	}
	r.wantRunning("api", 5, "1")
	r = r.restart()
	if a := r.apply(ovSecretStack(3, "v2", secret), false); !onlyUnchanged(a) || !hasNote(a, "rollback to deployment 1") {
		t.Fatalf("reload of the file rolled back from: %+v", a)
	}
	r.wantRunning("api", 5, "1")
	r.takeEvents()

	// A new secret is an edit of the file: the rollback ends.
	a := r.apply(ovSecretStack(3, "v2", rotated), false)
	if onlyUnchanged(a) || !hasNote(a, "rollback to deployment 1 dropped") {
		t.Fatalf("apply of a rotated secret: %+v", a)
	}
	if evs := r.takeEvents(); len(evs) != 1 || evs[0].Kind != messages.KindOverrideDropped {
		t.Fatalf("events after the rotation: %+v", evs)
	}

	st, err := stackfile.Parse("web.yaml", []byte(ovSecretStack(3, "v1", secret)))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := stackfile.Canonical(st, testKey)
	if err != nil || bytes.Contains(canon, []byte(secret)) || bytes.Contains(canon, []byte("sealed")) {
		t.Fatalf("canonical form (%v):\n%s", err, canon)
	}
	if _, err := digestOf(st, nil); !errors.Is(err, stackfile.ErrNoNodeKey) {
		t.Fatalf("digest of a stack with a secret and no key: %v", err)
	}
}

// SVC-23, SEC-2: `engenho apply` of what a listed file holds is accepted
// as the file's whether or not one side was already bound to the node key
// (the apply's dry run binds the request's stack; the file read from disk
// is not); another secret is another declaration.
func TestSVC23SameDeclarationWithSecrets(t *testing.T) {
	parse := func(secret string) *stackfile.Stack {
		st, err := stackfile.Parse("web.yaml", []byte(ovSecretStack(3, "v1", secret)))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sent := parse("pw-1")
	if err := sent.BindSecrets(testKey); err != nil {
		t.Fatal(err)
	}
	if same, err := sameDeclaration(parse("pw-1"), sent, testKey); err != nil || !same {
		t.Fatalf("same file, one side bound: %v %v", same, err)
	}
	if same, err := sameDeclaration(parse("pw-2"), sent, testKey); err != nil || same {
		t.Fatalf("another secret: %v %v", same, err)
	}
}

// SEC-2, REL-5, DMN-14: `reinit journal` carries sealed secrets over as
// they are when DATA/node.key is the key that sealed them. When it is not
// (the key was lost and the daemon made a new one) or there is none, the
// stacks whose secrets do not open stay in the attic with their stopped
// intents, since carried over they would hold the next boot again; the
// other stacks and every deployment counter are kept. A key file that is
// there but does not load drops nothing (fixing it keeps every secret).
func TestSEC2ReinitLeavesStacksSealedWithAnotherKey(t *testing.T) {
	dir := t.TempDir()
	keyPath := func(name string) string { return filepath.Join(dir, name, "node.key") }
	for _, name := range []string{"a", "b", "none", "damaged"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keyA, err := nodekey.LoadOrCreate(keyPath("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodekey.LoadOrCreate(keyPath("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath("damaged"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal"), NoSync: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDeployer(j, testNode{fake.New(fake.Options{})}, keyA)
	for _, src := range []string{strings.Replace(ovSecretStack(3, "v1", "pw-a"), "name: web", "name: vault", 1), ovStack(1, "v1")} {
		st, err := stackfile.Parse("s.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Apply(context.Background(), st, "socket: s.yaml", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, stack := range []string{"vault", "web"} {
		if err := d.SetStopped(stack, "worker", true, rootUser); err != nil {
			t.Fatal(err)
		}
	}
	var records []journal.Record
	if err := j.Walk("", func(r journal.Record) error { records = append(records, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, r := range records {
			kind, _, _ := strings.Cut(strings.TrimPrefix(r.Key, "v1/"), "/")
			out[kind]++
		}
		return out
	}
	keys := func(rs []journal.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Key)
		}
		return out
	}

	for _, name := range []string{"a", "damaged"} {
		kept, unsealed := withoutUnsealable(slices.Clone(records), keyPath(name), counts())
		if len(unsealed) != 0 || len(kept) != len(records) {
			t.Errorf("key %s: dropped %v, kept %v", name, unsealed, keys(kept))
		}
	}
	for _, name := range []string{"b", "none"} {
		salvaged := counts()
		kept, unsealed := withoutUnsealable(slices.Clone(records), keyPath(name), salvaged)
		if fmt.Sprint(unsealed) != "[vault]" {
			t.Errorf("key %s: left %v in the attic, want [vault]", name, unsealed)
		}
		got := keys(kept)
		for _, want := range []string{journal.PrefixDesired + "web", journal.PrefixStopped + "web/worker", journal.PrefixDeploySeq + "vault", journal.PrefixDeploySeq + "web"} {
			if !slices.Contains(got, want) {
				t.Errorf("key %s: %s was not kept: %v", name, want, got)
			}
		}
		for _, k := range got {
			if strings.HasPrefix(k, journal.PrefixDesired+"vault") || strings.HasPrefix(k, journal.PrefixStopped+"vault/") {
				t.Errorf("key %s: %s was kept", name, k)
			}
		}
		if salvaged["desired"] != 1 || salvaged["stopped"] != 1 {
			t.Errorf("key %s: counts %v, want 1 desired and 1 stopped", name, salvaged)
		}
	}
}
