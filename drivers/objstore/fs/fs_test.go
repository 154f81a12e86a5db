package fs_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/drivers/objstore/storetest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		if err := helperProcess(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, dir string) *fs.Store {
	t.Helper()
	s, err := fs.Open(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// DRV-8, DRV-9: the fs store passes the conformance suite.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return open(t, t.TempDir()) },
		storetest.Caps{ConditionalDelete: true, ConditionalLarge: true, LargeSize: 3 << 20})
}

// DRV-9: two Store values on one directory (two daemons sharing it) are one
// bucket, and the flock makes their conditional writes exclusive.
func TestConformanceTwoOpeners(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		dir := t.TempDir()
		return split{a: open(t, dir), b: open(t, dir), n: new(atomic.Uint64)}
	}, storetest.Caps{ConditionalDelete: true, ConditionalLarge: true, LargeSize: 3 << 20})
}
