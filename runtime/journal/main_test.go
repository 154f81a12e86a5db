package journal

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/drivertest/faultfs"
)

// TestMain runs the crash child when re-executed by crash_test.go, and
// checks that no test leaves a goroutine behind (background GC,
// retention, committer and subscriptions all end with Close).
func TestMain(m *testing.M) {
	faultfs.ServeIfChild()
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	if dir := os.Getenv(checkChildEnv); dir != "" {
		args := []string{dir}
		if os.Getenv(checkSalvageEnv) == "1" {
			args = append([]string{"--salvage"}, args...)
		}
		os.Exit(CheckMain(args, os.Stdout, os.Stderr))
	}
	code := m.Run()
	removeFixtures()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// openTest opens a journal in dir on a fake clock, closing it at cleanup.
func openTest(t testing.TB, dir string, edit func(*Options)) (*Journal, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(epoch)
	opts := Options{Dir: dir, Clock: clk}
	if edit != nil {
		edit(&opts)
	}
	j, err := Open(opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, clk
}

// must and must2 unwrap a result, panicking (failing the test with a
// stack) on error; Go does not let a testing.TB join a multi-value call.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
