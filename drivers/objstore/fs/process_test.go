package fs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/fs"
)

const (
	helperEnv   = "ENGENHO_FS_HELPER_DIR"
	procs       = 3
	incsPerProc = 25
	races       = 20
)

// DRV-9: the lock is a flock, not only a mutex: separate OS processes on
// one directory never lose a conditional update and never both win a
// create-only race.
func TestTwoProcessesOneDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.Put(context.Background(), "counter", strings.NewReader("0"), objstore.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	var gos []io.WriteCloser
	for range procs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		start, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs, gos = append(cmds, cmd), append(outs, out), append(gos, start)
	}
	for _, start := range gos { // let them all go at once
		start.Close()
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
	}
	obj, err := s.Get(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if want := strconv.Itoa(procs * incsPerProc); string(data) != want {
		t.Fatalf("counter %s, want %s: an update was lost across processes", data, want)
	}
	for r := range races {
		key := fmt.Sprintf("race/%d", r)
		obj, err := s.Get(context.Background(), key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		winner, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		total := 0
		for _, out := range outs {
			total += strings.Count(out.String(), "won "+key+" as ")
		}
		if total != 1 || !strings.Contains(strings.Join(outsText(outs), ""), "won "+key+" as "+string(winner)+"\n") {
			t.Fatalf("%s: %d processes claim the win (want 1, by %s)", key, total, winner)
		}
	}
}

func outsText(outs []*strings.Builder) []string {
	var texts []string
	for _, o := range outs {
		texts = append(texts, o.String())
	}
	return texts
}

// helperProcess is the child of TestTwoProcessesOneDirectory; TestMain
// runs it instead of the tests when helperEnv is set. It waits for its
// stdin to close so all children start racing together.
func helperProcess(dir string) error {
	io.Copy(io.Discard, os.Stdin)
	s, err := fs.Open(dir, fs.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	me := strconv.Itoa(os.Getpid())
	for r := range races {
		key := fmt.Sprintf("race/%d", r)
		_, err := s.Put(ctx, key, strings.NewReader(me), objstore.CreateOnly())
		switch {
		case err == nil:
			fmt.Printf("won %s as %s\n", key, me)
		case !errors.Is(err, objstore.ErrPreconditionFailed):
			return err
		}
		if err := increment(ctx, s); err != nil {
			return err
		}
	}
	for range incsPerProc - races {
		if err := increment(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func increment(ctx context.Context, s *fs.Store) error {
	for {
		obj, err := s.Get(ctx, "counter")
		if err != nil {
			return err
		}
		data, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(data))
		if err != nil {
			return err
		}
		_, err = s.Put(ctx, "counter", strings.NewReader(strconv.Itoa(n+1)), objstore.IfMatch(obj.ETag))
		if err == nil {
			return nil
		}
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			return err
		}
	}
}
