package main

import (
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/stackfile"
)

var (
	localNow = time.Date(2025, 3, 1, 12, 5, 0, 0, time.Local)
	at1203   = time.Date(2025, 3, 1, 12, 3, 0, 0, time.Local)
	uid0     = uint32(0)
)

func scaledByRoot() messages.Override {
	return messages.Override{Field: messages.OverrideReplicas, Value: "5", File: "3", Command: "engenho scale web/api 5",
		By: "uid 0 (root)", UID: &uid0, User: "root", At: at1203}
}

// SVC-23 (new rule: operator overrides), SVC-19: status shows an
// override beside the file's value: in the DESIRED column and as a line of
// the service's block, with who and when; a rollback and a stopped
// intent too.
func TestSVC23StatusShowsOverrides(t *testing.T) {
	res := control.StatusResult{Services: []messages.ServiceStatus{
		{Stack: "web", Service: "api", State: messages.ServiceConverged, Desired: 5, Running: 5, Healthy: 5, Revision: "3f9a2c1b7d4e",
			Overrides: []messages.Override{
				{Field: messages.OverrideDeployment, Value: "2", File: "3", By: "uid 1000 (alice)", At: at1203.Add(-24 * time.Hour)},
				scaledByRoot(),
			}},
		{Stack: "web", Service: "worker", State: messages.ServiceConverged, Stopped: true, Revision: "9c8b7a6d5e4f",
			Overrides: []messages.Override{{Field: messages.OverrideStopped, Value: "true", By: "uid 0 (root)", At: at1203}}},
	}}
	out := formatStatus(res, localNow)
	for _, want := range []string{
		"web/api     converged            5 (file 3)  5        5        3f9a2c1b7d4e  -\n",
		"  replicas 5 (file says 3; scaled by uid 0 (root) at 12:03)\n",
		"  deployment 2 (file says deployment 3; rolled back by uid 1000 (alice) at 2025-02-28 12:03)\n",
		"  stopped (by uid 0 (root) at 12:03; `engenho service start web/worker` lifts it)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// SVC-23, SVC-17: scale says what it did to the override: set, kept when
// run twice, dropped when back at the file's count.
func TestSVC23ScaleSaysWhatItDid(t *testing.T) {
	o := scaledByRoot()
	cases := []struct {
		res  control.ScaleResult
		want string
	}{
		{control.ScaleResult{Stack: "web", Service: "api", From: 3, To: 5, FileReplicas: 3, Override: &o, Changed: true},
			"web/api: 3 -> 5 replicas (the stack file says 3; kept across restarts and reloads until the file changes deploy.replicas)\n"},
		{control.ScaleResult{Stack: "web", Service: "api", From: 5, To: 5, FileReplicas: 3, Override: &o},
			"web/api: already 5 replicas (the stack file says 3; scaled by uid 0 (root) at 12:03)\n"},
		{control.ScaleResult{Stack: "web", Service: "api", From: 5, To: 3, FileReplicas: 3, Changed: true},
			"web/api: 5 -> 3 replicas (the stack file's count; no override left)\n"},
		{control.ScaleResult{Stack: "web", Service: "api", From: 3, To: 3, FileReplicas: 3},
			"web/api: already 3 replicas, the stack file's count\n"},
	}
	for _, tc := range cases {
		same(t, "scale", formatScale(tc.res, localNow), tc.want)
	}
}

// SVC-23, SVC-4: apply prints its notes about the overrides under the
// stack's plan.
func TestSVC23ApplyPrintsOverrideNotes(t *testing.T) {
	plans := []control.StackPlan{{Stack: "web", Deployment: "4",
		Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionUnchanged, FromRevision: "aaaaaaaaaaaa", ToRevision: "aaaaaaaaaaaa", FromReplicas: 5, ToReplicas: 5}},
		Notes:   []string{"api: replicas 5 kept (the file says 3; scaled by uid 0 (root) at 12:03); it holds until the file changes deploy.replicas"}}}
	out := formatPlans(plans, false)
	if !strings.HasSuffix(out, "\nnote: api: replicas 5 kept (the file says 3; scaled by uid 0 (root) at 12:03); it holds until the file changes deploy.replicas\n") {
		t.Errorf("plan:\n%s", out)
	}
}
