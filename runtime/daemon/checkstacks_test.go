package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/runtime/journal"
)

// claimNode is testNode where stack claimer's service web publishes port.
type claimNode struct {
	testNode
	claimer string
	port    int
}

func (n claimNode) PortClaimedBy(port int) (string, string, bool) {
	return n.claimer, "web", n.claimer != "" && port == n.port
}

func publishing(name string, port int) string {
	return "name: " + name + "\nservices:\n  web:\n    driver: fake\n    command: [\"/bin/web\"]\n    ports: [\"127.0.0.1:" + strconv.Itoa(port) + ":80\"]\n"
}

// SVC-1, SVC-2, DMN-16: the stack files a config lists are checked as one
// set, each problem said once. A file that does not parse also has its
// well-formed services checked against the node; a second file of a stack
// is refused (not also as "defined twice in this request"); two new stacks
// publishing one port are refused together; and a port a deployed stack
// publishes is said once, by the node check, not again by the check across
// files. Only the stacks without a problem are returned.
func TestSVC1ListedStackFilesEveryProblemOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.yaml", publishing("a", 18080))
	b := write("b.yaml", publishing("b", 18080))
	again := write("again.yaml", publishing("a", 18081))
	broken := write("broken.yaml", "name: broken\nservices:\n  ok:\n    driver: nosuch\n    command: [\"/bin/ok\"]\n  bad:\n    command: [\"/bin/bad\"]\n    comand: oops\n")
	check := func(n claimNode, paths ...string) ([]listedStack, []string) {
		j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		return checkStackFiles(&runtime{deployer: NewDeployer(j, n, testKey)}, paths)
	}

	node := claimNode{testNode: testNode{fake.New(fake.Options{})}}
	ok, errs := check(node, a, b, again, broken)
	if len(ok) != 1 || ok[0].stack.Name != "a" {
		t.Errorf("checked stacks: %+v, want only a", ok)
	}
	all := strings.Join(errs, "\n")
	for _, want := range []string{
		`stack file ` + again + `: stack "a" is also declared in ` + a,
		broken + ":8: services.bad.comand: unknown key",
		broken + ":4: services.ok.driver: driver \"nosuch\" is not available on this node",
		"stack b refused: " + b + ":6: services.web.ports[0]: port 18080 is also published by stack a service web (" + a + ")",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if len(errs) != 3 || strings.Contains(all, "in this request") {
		t.Errorf("want 3 errors, each problem once:\n%s", all)
	}

	// Stack a is deployed: the node check refuses b's port, and the check
	// across files does not say it again.
	node.claimer, node.port = "a", 18080
	_, errs = check(node, a, b)
	all = strings.Join(errs, "\n")
	if len(errs) != 1 || strings.Count(all, "18080") != 1 || !strings.Contains(all, "port 18080 is published by stack a service web") {
		t.Errorf("a port a deployed stack publishes: want it said once:\n%s", all)
	}
}
