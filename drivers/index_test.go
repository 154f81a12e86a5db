package drivers

import (
	"maps"
	"slices"
	"testing"
)

// PERF-3: a List for one service looks only at that service's instances;
// a selector without both a stack and a service looks at all of them.
func TestPERF3ServiceIndex(t *testing.T) {
	x := ServiceIndex{}
	web := Labels{LabelStack: "web", LabelService: "api"}
	x.Add("web-api-1", web)
	x.Add("web-api-2", web)
	x.Add("web-db-1", Labels{LabelStack: "web", LabelService: "db"})
	names, ok := x.Candidates(Labels{LabelStack: "web", LabelService: "api", LabelSlot: "1"})
	if got := slices.Sorted(maps.Keys(names)); !ok || !slices.Equal(got, []string{"web-api-1", "web-api-2"}) {
		t.Fatalf("candidates %v %v", got, ok)
	}
	if _, ok := x.Candidates(Labels{LabelStack: "web"}); ok {
		t.Fatal("a stack alone narrowed the candidates")
	}
	x.Remove("web-api-1", web)
	x.Remove("web-api-2", web)
	if names, ok := x.Candidates(web); !ok || len(names) != 0 || len(x) != 1 {
		t.Fatalf("after removing both: %v %v, %d keys", names, ok, len(x))
	}
}
