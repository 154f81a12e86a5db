package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// The rule for a value that both the stack file and a command set
// (SVC-23, docs/services.md "Operator overrides"): the command's value is
// recorded as an override beside the file's value at that moment; it
// holds across restarts, reloads and applies of the same file, and is
// dropped, with an event, only when the file itself changes that field.
// These functions are the rule's pure core; the Deployer performs it.

// digestOf identifies a stack's declaration: a hash of its canonical
// definition, wherever it was read from (Source is left out). A secret
// goes in as the node key's digest of it (stackfile.Canonical): the
// digest is the same at every reload of an unchanged file, changes when
// the secret does, and cannot be used to test guesses of it (SEC-2).
func digestOf(st *stackfile.Stack, key stackfile.NodeKey) (string, error) {
	c := st.Clone()
	c.Source = ""
	b, err := stackfile.Canonical(c, key)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// declarationOf is what the journal keeps of a file's definition.
func declarationOf(st *stackfile.Stack, digest, source string, at time.Time) journal.Declaration {
	d := journal.Declaration{Digest: digest, Source: source, Replicas: map[string]int{}, At: at}
	for name, svc := range st.Services {
		d.Replicas[name] = svc.Deploy.Replicas
	}
	return d
}

// fileDigest is the digest of the stack file's declaration: the one
// recorded, or, for a record written before engenho kept it, the current
// deployment's.
func fileDigest(cur journal.StackState, raw *stackfile.Stack, key stackfile.NodeKey) (string, error) {
	if cur.Declared != nil && cur.Declared.Digest != "" {
		return cur.Declared.Digest, nil
	}
	return digestOf(raw, key)
}

// fileReplicas is the replica count the stack file declares for service.
func fileReplicas(cur journal.StackState, raw *stackfile.Stack, service string) int {
	if cur.Declared != nil {
		if n, ok := cur.Declared.Replicas[service]; ok {
			return n
		}
	}
	return raw.Services[service].Deploy.Replicas
}

// effective is def with the overrides applied: what the tree runs.
func effective(def *stackfile.Stack, overrides []journal.Override) *stackfile.Stack {
	if def == nil || len(overrides) == 0 {
		return def
	}
	out := def.Clone()
	for _, o := range overrides {
		svc, ok := out.Services[o.Service]
		if o.Field != journal.FieldReplicas || !ok {
			continue
		}
		if n, err := strconv.Atoi(o.Value); err == nil {
			svc.Deploy.Replicas = n
			out.Services[o.Service] = svc
		}
	}
	return out
}

// dropped is an override a new declaration ends, and why.
type dropped struct {
	journal.Override
	reason string
}

// sift splits the stack's overrides into those that hold under the file
// next (digest: its declaration) and those it ends: a replica count the
// file changed, a service it no longer has, a rollback of a file that
// changed.
func sift(overrides []journal.Override, next *stackfile.Stack, digest string) (kept []journal.Override, ended []dropped) {
	for _, o := range overrides {
		if why := ends(o, next, digest); why != "" {
			ended = append(ended, dropped{o, why})
			continue
		}
		kept = append(kept, o)
	}
	return kept, ended
}

func ends(o journal.Override, next *stackfile.Stack, digest string) string {
	switch o.Field {
	case journal.FieldDeployment:
		if o.File != digest {
			return "the stack file changed since the rollback"
		}
	case journal.FieldReplicas:
		svc, ok := next.Services[o.Service]
		switch {
		case !ok:
			return "the stack file no longer has the service"
		case strconv.Itoa(svc.Deploy.Replicas) != o.File:
			return fmt.Sprintf("the stack file changed deploy.replicas from %s to %d", o.File, svc.Deploy.Replicas)
		}
	}
	return ""
}

// without is overrides less the one of (service, field).
func without(overrides []journal.Override, service, field string) []journal.Override {
	out := make([]journal.Override, 0, len(overrides))
	for _, o := range overrides {
		if o.Service != service || o.Field != field {
			out = append(out, o)
		}
	}
	return out
}

// clockText is "12:03" today, the date too otherwise; local time.
func clockText(at, now time.Time) string {
	at, now = at.Local(), now.Local()
	if at.Format("2006-01-02") == now.Format("2006-01-02") {
		return at.Format("15:04")
	}
	return at.Format("2006-01-02 15:04")
}

// keptNote and droppedNote explain an apply's effect on an override.
func keptNote(o journal.Override, now time.Time) string {
	if o.Field == journal.FieldDeployment {
		return fmt.Sprintf("rollback to deployment %s (%s at %s) holds: the stack file is the one it rolled back from; "+
			"edit the file, or run `engenho rollback %s` to go back to deployment %s", o.Value, o.By, clockText(o.At, now), o.Stack, o.Replaced)
	}
	return fmt.Sprintf("%s: replicas %s kept (the file says %s; scaled by %s at %s); it holds until the file changes deploy.replicas",
		o.Service, o.Value, o.File, o.By, clockText(o.At, now))
}

func droppedNote(d dropped, dryRun bool) string {
	verb := "dropped"
	if dryRun {
		verb = "would be dropped"
	}
	if d.Field == journal.FieldDeployment {
		return fmt.Sprintf("rollback to deployment %s %s: %s", d.Value, verb, d.reason)
	}
	return fmt.Sprintf("%s: replicas %s (engenho scale by %s) %s: %s", d.Service, d.Value, d.By, verb, d.reason)
}

// droppedEvent announces an override that ended (SVC-20, SVC-23).
func droppedEvent(d dropped, at time.Time) messages.Event {
	ev := overrideEvent(messages.KindOverrideDropped, d.Override, at, droppedNote(d, false))
	ev.Fields["reason"] = d.reason
	return ev
}

func overrideEvent(kind string, o journal.Override, at time.Time, msg string) messages.Event {
	return messages.Event{UnixMs: at.UnixMilli(), Level: messages.LevelInfo, Kind: kind, Stack: o.Stack, Service: o.Service,
		Actor: "daemon", Message: msg, Fields: map[string]string{
			"field": o.Field, "value": o.Value, "file": o.File, "command": o.Command,
			"by_uid": strconv.FormatUint(uint64(o.By.UID), 10), "by_user": o.By.User,
		}}
}

// statusOverrides is what status shows of a stack's overrides and stopped
// intents, per service.
func statusOverrides(st journal.StackState, services []string, stopped []journal.StoppedIntent) map[string][]messages.Override {
	out := map[string][]messages.Override{}
	pin, pinned := st.Override("", journal.FieldDeployment)
	for _, name := range services {
		if pinned {
			out[name] = append(out[name], shown(messages.OverrideDeployment, strconv.FormatUint(st.Current.ID, 10), pin.Replaced, pin))
		}
		if o, ok := st.Override(name, journal.FieldReplicas); ok {
			out[name] = append(out[name], shown(messages.OverrideReplicas, o.Value, o.File, o))
		}
	}
	for _, s := range stopped {
		if s.Stack != st.Stack {
			continue
		}
		o := messages.Override{Field: messages.OverrideStopped, Value: "true", At: s.Since}
		if s.By != nil {
			uid := s.By.UID
			o.Command, o.By, o.UID, o.User = "engenho service stop "+s.Stack+"/"+s.Service, s.By.String(), &uid, s.By.User
		}
		out[s.Service] = append(out[s.Service], o)
	}
	return out
}

func shown(field, value, file string, o journal.Override) messages.Override {
	uid := o.By.UID
	return messages.Override{Field: field, Value: value, File: file, Command: o.Command,
		By: o.By.String(), UID: &uid, User: o.By.User, At: o.At}
}
