package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The import graph points one way (docs/decisions.md, "Layers"): every
// package has a place in the table below and imports only packages placed
// lower. These tests read the graph from `go list` and fail the build on an
// import that points up or sideways, on an actor reaching past its direct
// children, and on chaos code outside the chaos build.
//
// Only the graph that ships is ranked: a test file may import a higher
// layer (the activator's tests run through the real edge, the config's
// tests check that its defaults agree with the packages it configures).
// The chaos rule covers test files too.

const module = "github.com/engenho/engenho"

// rank is a package's place: its layer, then its level inside the layer.
// An import is allowed only to a lower (layer, level).
type rank struct{ layer, level int }

// layerNames name the layers, bottom to top; every doc.go says its own.
var layerNames = []string{"drivers/clock", "drivers", "configs", "messages", "actors", "runtime", "chaos", "cmd"}

// ranks places every package of the module (paths relative to it).
var ranks = map[string]rank{
	"drivers/clock": {0, 0},

	"drivers":                     {1, 0},
	"drivers/cgroup":              {1, 0},
	"drivers/ports":               {1, 0},
	"drivers/sqlitesnap":          {1, 0},
	"drivers/objstore":            {1, 1},
	"drivers/process":             {1, 1},
	"drivers/incus":               {1, 1},
	"drivers/fake":                {1, 1},
	"drivers/probe":               {1, 1},
	"drivers/drivertest":          {1, 1},
	"drivers/drivertest/faultfs":  {1, 2},
	"drivers/objstore/fs":         {1, 2},
	"drivers/objstore/s3":         {1, 2},
	"drivers/objstore/fake":       {1, 2},
	"drivers/objstore/lease":      {1, 2},
	"drivers/objstore/storetest":  {1, 2},
	"drivers/objstore/checkpoint": {1, 3},
	"drivers/objstore/backend":    {1, 3},
	"drivers/objstore/s3/s3test":  {1, 3},

	"configs":              {2, 0},
	"configs/yamlkey":      {2, 0},
	"configs/stackfile":    {2, 1},
	"configs/daemonconfig": {2, 1},

	"messages":      {3, 0},
	"messages/step": {3, 1}, // the one Step/Effect contract, when it lands

	"actors":                   {4, 0},
	"actors/supervise/ladder":  {4, 0},
	"actors/supervise":         {4, 1},
	"actors/replica":           {4, 2},
	"actors/sidecar":           {4, 2},
	"actors/service":           {4, 3},
	"actors/host":              {4, 3},
	"actors/stack":             {4, 4},
	"actors/activator":         {4, 4},
	"actors/root":              {4, 5},
	"actors/internal/treetest": {4, 6},

	"runtime":                     {5, 0},
	"runtime/lifecycle":           {5, 0},
	"runtime/logging":             {5, 0},
	"runtime/datadir":             {5, 0},
	"runtime/sdnotify":            {5, 0},
	"runtime/journal":             {5, 0},
	"runtime/balancer":            {5, 0},
	"runtime/edge":                {5, 0},
	"runtime/metrics":             {5, 0},
	"runtime/config":              {5, 0},
	"runtime/nodekey":             {5, 0},
	"runtime/usage":               {5, 0},
	"runtime/control":             {5, 1},
	"runtime/control/controltest": {5, 2},
	"runtime/daemon":              {5, 3},

	"chaos/inject":     {6, 0},
	"chaos/schedule":   {6, 0},
	"chaos/faultproxy": {6, 0},
	"chaos/invariant":  {6, 1},
	"chaos/report":     {6, 2},
	"chaos":            {6, 3},

	"cmd":         {7, 0},
	"cmd/engenho": {7, 1},
}

// actorChildren are the direct children of each actor in the tree
// (root > stack, activator; stack > service > replica; activator > host >
// sidecar). Inside actors/ a package imports supervise (and its
// subpackages) and its direct children, nothing else.
var actorChildren = map[string][]string{
	"actors/root":      {"actors/stack", "actors/activator"},
	"actors/stack":     {"actors/service"},
	"actors/service":   {"actors/replica"},
	"actors/activator": {"actors/host"},
	"actors/host":      {"actors/sidecar"},
}

// pkg is one package as the checks see it: paths relative to the module,
// only imports of the module's own packages.
type pkg struct {
	Path        string
	Dir         string
	Imports     []string // of the files that build (no test files)
	TestImports []string // of its _test.go files, internal and external
}

// listJSON is the part of `go list -json` the checks read.
type listJSON struct {
	ImportPath   string
	Dir          string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// loadGraph lists every package of the module with the given build tags.
func loadGraph(t *testing.T, tags string) []pkg {
	t.Helper()
	args := []string{"list", "-json"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var l listJSON
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, pkg{Path: local(l.ImportPath), Dir: l.Dir, Imports: ours(l.Imports),
			TestImports: ours(append(l.TestImports, l.XTestImports...))})
	}
	if len(pkgs) < len(ranks)/2 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func local(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// ours keeps the module's own imports, relative to the module.
func ours(imports []string) []string {
	var out []string
	for _, p := range imports {
		if p == module || strings.HasPrefix(p, module+"/") {
			out = append(out, local(p))
		}
	}
	return out
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// checkLayers returns every import that breaks the layering, one line each.
func checkLayers(pkgs []pkg) []string {
	var bad []string
	report := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	for _, p := range pkgs {
		from, ok := ranks[p.Path]
		if !ok {
			report("%s has no place in the layer table (cmd/layers_test.go ranks): add it, below everything it imports", p.Path)
			continue
		}
		for _, imp := range p.Imports {
			to, ok := ranks[imp]
			if !ok {
				continue // reported as a package of its own
			}
			switch {
			case to.layer > from.layer:
				report("%s imports %s: up from layer %s to layer %s", p.Path, imp, layerNames[from.layer], layerNames[to.layer])
			case to.layer == from.layer && to.level >= from.level:
				report("%s imports %s: sideways or up inside layer %s (level %d to %d)", p.Path, imp, layerNames[from.layer], from.level, to.level)
			}
			if under(p.Path, "actors") && under(imp, "actors") && !actorImportAllowed(p.Path, imp) {
				report("%s imports %s: an actor imports only supervise and its direct children %v", p.Path, imp, actorChildren[p.Path])
			}
			if under(imp, "actors/internal") {
				report("%s imports %s: a test harness, for _test.go files only", p.Path, imp)
			}
		}
		if !under(p.Path, "chaos") {
			for _, imp := range append(append([]string(nil), p.Imports...), p.TestImports...) {
				if under(imp, "chaos") {
					report("%s imports %s in a file built without -tags chaos: only chaos/ and files tagged chaos may", p.Path, imp)
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func actorImportAllowed(from, to string) bool {
	if under(to, "actors/supervise") || under(from, "actors/internal") {
		return true // the harness wires whole trees, as the daemon does
	}
	for _, c := range actorChildren[from] {
		if c == to {
			return true
		}
	}
	return false
}

// The module's graph, default build and chaos build, breaks no rule.
func TestLayers(t *testing.T) {
	for _, tags := range []string{"", "chaos"} {
		pkgs := loadGraph(t, tags)
		bad := checkLayers(pkgs)
		if tags == "chaos" {
			bad = allowTaggedChaos(t, bad)
		}
		for _, b := range bad {
			t.Errorf("tags %q: %s", tags, b)
		}
		if len(bad) == 0 {
			edges := 0
			for _, p := range pkgs {
				edges += len(p.Imports)
			}
			t.Logf("tags %q: %d packages, %d internal import edges, none pointing up or sideways", tags, len(pkgs), edges)
		}
	}
}

// allowTaggedChaos drops, from a chaos-build check, the imports of chaos
// packages by cmd/engenho made from files tagged chaos: the one place the
// chaos build links them. Any other is kept.
func allowTaggedChaos(t *testing.T, bad []string) []string {
	t.Helper()
	tagged := taggedChaosImports(t, "engenho")
	var out []string
	for _, b := range bad {
		var imp string
		if n, _ := fmt.Sscanf(b, "cmd/engenho imports %s in a file built without -tags chaos", &imp); n == 1 && tagged[imp] {
			continue
		}
		out = append(out, b)
	}
	return out
}

// taggedChaosImports returns the chaos packages imported by the files of
// dir that carry //go:build chaos.
func taggedChaosImports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(src, []byte("//go:build chaos\n")) {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p := local(strings.Trim(imp.Path.Value, `"`)); under(p, "chaos") {
				out[p] = true
			}
		}
	}
	return out
}

// The shipped binary links no chaos package; the chaos build does (so the
// first check would see one if it crept in).
func TestShippedBinaryLinksNoChaos(t *testing.T) {
	deps := func(tags ...string) []string {
		cmd := exec.Command("go", append(append([]string{"list", "-deps"}, tags...), "./cmd/engenho")...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", tags, err)
		}
		var chaos []string
		for _, p := range strings.Fields(string(out)) {
			if under(local(p), "chaos") && strings.HasPrefix(p, module) {
				chaos = append(chaos, local(p))
			}
		}
		return chaos
	}
	if got := deps(); len(got) != 0 {
		t.Fatalf("the default build of cmd/engenho links %v", got)
	}
	if got := deps("-tags", "chaos"); len(got) == 0 {
		t.Fatal("the chaos build of cmd/engenho links no chaos package: is the tag still wired?")
	}
}

// The checker fails on each kind of planted bad import, on a small graph
// that is fine without it and on the module's real graph.
func TestLayerCheckCatchesPlantedImports(t *testing.T) {
	good := []pkg{
		{Path: "drivers/clock"},
		{Path: "drivers", Imports: []string{"drivers/clock"}},
		{Path: "messages", Imports: []string{"drivers"}},
		{Path: "actors/supervise", Imports: []string{"messages", "actors/supervise/ladder"}},
		{Path: "actors/supervise/ladder", Imports: []string{"messages"}},
		{Path: "actors/replica", Imports: []string{"actors/supervise"}},
		{Path: "actors/service", Imports: []string{"actors/replica", "actors/supervise"}},
		{Path: "actors/host"},
		{Path: "actors/stack", Imports: []string{"actors/service"}},
		{Path: "actors/root", Imports: []string{"actors/stack"}, TestImports: []string{"actors/internal/treetest"}},
		{Path: "actors/internal/treetest", Imports: []string{"actors/root", "actors/service"}},
		{Path: "runtime/edge", Imports: []string{"actors/host"}},
		{Path: "runtime/daemon", Imports: []string{"actors/root", "runtime/edge"}, TestImports: []string{"cmd/engenho"}},
		{Path: "chaos", Imports: []string{"chaos/inject", "runtime/control"}},
	}
	if bad := checkLayers(good); len(bad) != 0 {
		t.Fatalf("a good graph: %v", bad)
	}
	plants := []struct {
		name, from, to string
		test           bool
		want           string
	}{
		{"up a layer", "drivers/clock", "runtime/daemon", false, "drivers/clock imports runtime/daemon: up from layer drivers/clock to layer runtime"},
		{"messages up to actors", "messages", "actors/supervise/ladder", false, "messages imports actors/supervise/ladder: up from layer messages to layer actors"},
		{"sideways", "actors/host", "actors/service", false, "actors/host imports actors/service: sideways or up inside layer actors"},
		{"up inside a layer", "actors/replica", "actors/service", false, "actors/replica imports actors/service: sideways or up inside layer actors"},
		{"a grandchild", "actors/root", "actors/service", false, "actors/root imports actors/service: an actor imports only supervise and its direct children"},
		{"chaos in a shipped file", "runtime/daemon", "chaos/inject", false, "runtime/daemon imports chaos/inject in a file built without -tags chaos"},
		{"chaos in an untagged test", "runtime/edge", "chaos", true, "runtime/edge imports chaos in a file built without -tags chaos"},
		{"the harness outside tests", "runtime/daemon", "actors/internal/treetest", false, "runtime/daemon imports actors/internal/treetest: a test harness"},
	}
	for _, pl := range plants {
		g := plant(good, pl.from, pl.to, pl.test)
		if bad := checkLayers(g); !anyHas(bad, pl.want) {
			t.Errorf("%s: planted %s -> %s, reported %v", pl.name, pl.from, pl.to, bad)
		}
	}
	if bad := checkLayers(append(append([]pkg(nil), good...), pkg{Path: "runtime/newthing"})); !anyHas(bad, "runtime/newthing has no place in the layer table") {
		t.Errorf("an unranked package: %v", bad)
	}
	real := loadGraph(t, "")
	if bad := checkLayers(plant(real, "drivers/probe", "configs/stackfile", false)); !anyHas(bad, "drivers/probe imports configs/stackfile: up") {
		t.Errorf("the real graph with drivers/probe -> configs/stackfile: %v", bad)
	}
}

// plant returns a copy of g with from importing to.
func plant(g []pkg, from, to string, test bool) []pkg {
	out := make([]pkg, len(g))
	for i, p := range g {
		p.Imports = append([]string(nil), p.Imports...)
		p.TestImports = append([]string(nil), p.TestImports...)
		if p.Path == from {
			if test {
				p.TestImports = append(p.TestImports, to)
			} else {
				p.Imports = append(p.Imports, to)
			}
		}
		out[i] = p
	}
	return out
}

func anyHas(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// layerLine is how a doc.go names its layer: "Layer: runtime".
var layerLine = regexp.MustCompile(`(?m)^Layer: (\S+?)[.,:;]?(\s|$)`)

// Every package says what it holds and what it may import in a doc.go,
// whose package comment names the package's layer as the table does.
func TestEveryPackageDocNamesItsLayer(t *testing.T) {
	for _, p := range loadGraph(t, "") {
		r, ok := ranks[p.Path]
		if !ok {
			continue // TestLayers reports it
		}
		f := filepath.Join(p.Dir, "doc.go")
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: no doc.go: %v", p.Path, err)
			continue
		}
		if af.Doc == nil {
			t.Errorf("%s: doc.go has no package comment", p.Path)
			continue
		}
		m := layerLine.FindStringSubmatch(af.Doc.Text())
		if m == nil {
			t.Errorf("%s: doc.go does not say its layer (a line \"Layer: %s ...\")", p.Path, layerNames[r.layer])
		} else if m[1] != layerNames[r.layer] {
			t.Errorf("%s: doc.go says layer %s, the table %s", p.Path, m[1], layerNames[r.layer])
		}
	}
}
