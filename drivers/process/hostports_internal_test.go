package process

import (
	"errors"
	"fmt"
	"testing"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/ports"
)

// SVC-24: a spec port with HostPort 0 gets its host port from the driver's
// allocator; a fixed HostPort is kept; the next run of the instance gets a
// fresh port (the last run's is released, but not handed out again at
// once); a spent range fails and gives back what it took.
func TestSVC24AssignPortsFromTheAllocator(t *testing.T) {
	hp := ports.New(ports.Range{Low: 20000, High: 20002}, func(int) error { return nil })
	spec := []drivers.Port{{Target: 80, HostPort: 18080}, {Target: 443}}
	first, err := assignPorts(hp, spec, nil)
	if err != nil || fmt.Sprint(first) != "map[80:18080 443:20000]" {
		t.Fatalf("first run %v, %v", first, err)
	}
	second, err := assignPorts(hp, spec, first)
	if err != nil || fmt.Sprint(second) != "map[80:18080 443:20001]" {
		t.Fatalf("second run %v, %v", second, err)
	}
	if hp.InUse(20000) || !hp.InUse(20001) || hp.InUse(18080) {
		t.Fatalf("after the second run: 20000 %v, 20001 %v, 18080 %v", hp.InUse(20000), hp.InUse(20001), hp.InUse(18080))
	}
	two := []drivers.Port{{Target: 1}, {Target: 2}, {Target: 3}}
	if _, err := assignPorts(hp, two, nil); !errors.Is(err, ports.ErrExhausted) {
		t.Fatalf("three ports from the two left: %v, want ErrExhausted", err)
	}
	if hp.InUse(20002) || hp.InUse(20000) {
		t.Fatal("a failed assignment kept the ports it took")
	}
}
