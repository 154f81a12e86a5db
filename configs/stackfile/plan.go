package stackfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// Action is what applying a stack does to one service (SVC-4).
type Action string

const (
	// ActionCreate: a new service; its replicas are created.
	ActionCreate Action = "create"
	// ActionUpdate: a new revision; instances are replaced in a rolling
	// update. Replicas may change in the same step (Change.Replicas).
	ActionUpdate Action = "update"
	// ActionScale: same revision, another replica count.
	ActionScale Action = "scale"
	// ActionReconfigure: same revision and replicas, but settings that
	// apply in place changed (update_config, restart policy, ladder,
	// grace periods, published ports, depends_on, hibernate settings,
	// sidecars). No instance is replaced. The spec lists five actions;
	// this sixth keeps "unchanged" honest (docs/stackfile.md).
	ActionReconfigure Action = "reconfigure"
	// ActionRemove: the service is gone from the file; its instances are
	// retired.
	ActionRemove Action = "remove"
	// ActionUnchanged: nothing differs.
	ActionUnchanged Action = "unchanged"
)

// Change is the plan for one service.
type Change struct {
	Service string `json:"service"`
	Action  Action `json:"action"`
	// FromRevision is empty for create; ToRevision is empty for remove.
	FromRevision string `json:"from_revision,omitempty"`
	ToRevision   string `json:"to_revision,omitempty"`
	// FromReplicas and ToReplicas are 0 where the service does not exist.
	FromReplicas int `json:"from_replicas"`
	ToReplicas   int `json:"to_replicas"`
	// Fields lists the keys that differ (env.NAME for env, never a value),
	// sorted; empty for create, remove and unchanged.
	Fields []string `json:"fields,omitempty"`
}

// Plan compares the stack running now (nil: none) with the one to apply
// (nil: remove the stack) service by service. Order: next's services in
// file order, then the removed ones in current's order.
func Plan(current, next *Stack) []Change {
	cur, nxt := services(current), services(next)
	var out []Change
	for _, name := range order(next) {
		svc := nxt[name]
		old, existed := cur[name]
		if !existed {
			out = append(out, Change{Service: name, Action: ActionCreate, ToRevision: svc.Revision(), ToReplicas: svc.Deploy.Replicas})
			continue
		}
		out = append(out, compare(old, svc))
	}
	for _, name := range order(current) {
		if _, kept := nxt[name]; kept {
			continue
		}
		old := cur[name]
		out = append(out, Change{Service: name, Action: ActionRemove, FromRevision: old.Revision(), FromReplicas: old.Deploy.Replicas})
	}
	return out
}

func services(st *Stack) map[string]Service {
	if st == nil {
		return nil
	}
	return st.Services
}

func order(st *Stack) []string {
	if st == nil {
		return nil
	}
	out := make([]string, 0, len(st.Order))
	for _, name := range st.Order {
		if _, ok := st.Services[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

func compare(old, svc Service) Change {
	c := Change{
		Service:      svc.Name,
		FromRevision: old.Revision(), ToRevision: svc.Revision(),
		FromReplicas: old.Deploy.Replicas, ToReplicas: svc.Deploy.Replicas,
		Fields: diffFields(old, svc),
	}
	switch {
	case c.FromRevision != c.ToRevision:
		c.Action = ActionUpdate
	case c.FromReplicas != c.ToReplicas:
		c.Action = ActionScale
	case len(c.Fields) > 0:
		c.Action = ActionReconfigure
	default:
		c.Action, c.Fields = ActionUnchanged, nil
	}
	return c
}

// String is one line: "api: update 3f9a2c1b7d4e -> 7b1d4e09aa31, replicas
// 2 -> 3 (command, env.DB_URL)".
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", c.Service, c.Action)
	if rev := c.revisionText(); rev != "" {
		b.WriteString(" " + rev)
	}
	if rep := c.replicasText(); rep != "" {
		b.WriteString(", replicas " + rep)
	}
	if len(c.Fields) > 0 {
		b.WriteString(" (" + strings.Join(c.Fields, ", ") + ")")
	}
	return b.String()
}

func (c Change) revisionText() string {
	switch {
	case c.FromRevision == "":
		return c.ToRevision
	case c.ToRevision == "" || c.FromRevision == c.ToRevision:
		return c.FromRevision
	}
	return c.FromRevision + " -> " + c.ToRevision
}

func (c Change) replicasText() string {
	switch c.Action {
	case ActionCreate:
		return fmt.Sprint(c.ToReplicas)
	case ActionRemove:
		return fmt.Sprint(c.FromReplicas)
	}
	if c.FromReplicas != c.ToReplicas {
		return fmt.Sprintf("%d -> %d", c.FromReplicas, c.ToReplicas)
	}
	return fmt.Sprint(c.ToReplicas)
}

// FormatPlan renders changes as the table `engenho apply --dry-run`
// prints: SERVICE ACTION REVISION REPLICAS CHANGED.
func FormatPlan(changes []Change) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tACTION\tREVISION\tREPLICAS\tCHANGED")
	for _, c := range changes {
		fields := strings.Join(c.Fields, ", ")
		if fields == "" {
			fields = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Service, c.Action, c.revisionText(), c.replicasText(), fields)
	}
	tw.Flush()
	return buf.String()
}

// diffFields lists the key paths whose values differ between a and b.
// Env values are compared but never returned.
func diffFields(a, b Service) []string {
	fa, fb := flatten(a), flatten(b)
	var out []string
	for k, v := range fa {
		if w, ok := fb[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	out = collapse(out)
	slices.Sort(out)
	return slices.Compact(out)
}

// collapse keeps the list short: a list of words (command, args, delays)
// is reported as the list, and every path under one item of a list of
// maps (ports[0].published, ports[0].host_ip) as the item.
func collapse(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasSuffix(p, "]") {
			p = p[:strings.LastIndexByte(p, '[')]
		}
		if i := strings.IndexByte(p, ']'); i >= 0 {
			p = p[:i+1]
		}
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// flatten maps each leaf key path of svc to its JSON text, with secret
// values in (for comparing only) and env values as leaves.
func flatten(svc Service) map[string]string {
	svc = svc.forCompare()
	svc.Name = ""
	raw, err := json.Marshal(svc)
	if err != nil {
		return map[string]string{"": fmt.Sprintf("%#v", svc)}
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return map[string]string{"": string(raw)}
	}
	out := map[string]string{}
	flattenInto(out, "", tree)
	return out
}

func flattenInto(out map[string]string, path string, v any) {
	switch t := v.(type) {
	case map[string]any:
		leafChildren := path == "env" || strings.HasSuffix(path, ".env") // env values are leaves
		for k, child := range t {
			p := join(path, k)
			if leafChildren {
				b, _ := json.Marshal(child)
				out[p] = string(b)
				continue
			}
			flattenInto(out, p, child)
		}
	case []any:
		if path == "secrets" { // a secret file is a leaf named by its target
			flattenSecrets(out, t)
			return
		}
		for i, child := range t {
			flattenInto(out, index(path, i), child)
		}
	default:
		b, _ := json.Marshal(t)
		out[path] = string(b)
	}
}
