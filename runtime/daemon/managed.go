package daemon

import (
	"fmt"
	"slices"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/runtime/control"
)

// A stack whose file the config lists is the file's: a reload deploys the
// file again. The commands that would replace the whole declaration are
// refused up front, saying what to edit instead, rather than silently
// undone by the next reload (SVC-23); commands on one value are overrides
// (overrides.go).

// listedFile is the stack file the config lists that declares stack.
func (h *handler) listedFile(rt *runtime, stack string) (string, bool) {
	files := h.d.settingsNow().StackFiles
	for _, s := range rt.deployer.Sources() {
		if s.stack == stack && slices.Contains(files, s.source) {
			return s.source, true
		}
	}
	return "", false
}

// refuseRemoveListed refuses `engenho remove` of a stack the config's
// stack files declare.
func (h *handler) refuseRemoveListed(rt *runtime, stack string) error {
	path, ok := h.listedFile(rt, stack)
	if !ok {
		return nil
	}
	return control.Errorf(control.CodeRefused, "stack %s is declared by %s, which the config lists: the next reload would deploy it again. "+
		"Take the file out of `stacks` in %s (or delete the file, when a glob lists it); the daemon then removes the stack", stack, path, h.d.opts.ConfigPath)
}

// checkApplyListed refuses an `engenho apply` that would replace the
// definition of a stack the config's stack files declare with another
// one; the same definition as the file holds now is accepted, as coming
// from that file (so `apply --wait` can follow an edit). A dry run is
// never refused: it gets the reason as a note.
func (h *handler) checkApplyListed(rt *runtime, st *stackfile.Stack, dryRun bool) (source, note string, err error) {
	source = "socket: " + st.Source
	path, ok := h.listedFile(rt, st.Name)
	if !ok {
		return source, "", nil
	}
	why := ""
	onDisk, err := stackfile.ParseFile(path)
	if err != nil {
		why = fmt.Sprintf("(it does not load now: %v)", err)
	} else if same, err := sameDeclaration(onDisk, st, rt.deployer.key); err != nil || !same {
		why = "(this definition is not what the file holds)"
	}
	if why == "" {
		return path, "", nil
	}
	msg := fmt.Sprintf("stack %s is declared by %s, which the config lists %s: the next reload would deploy the file again. "+
		"Edit that file instead: the daemon applies it when it is saved", st.Name, path, why)
	if dryRun {
		return source, "applying this would be refused: " + msg, nil
	}
	return "", "", control.Errorf(control.CodeRefused, "%s", msg)
}

func sameDeclaration(a, b *stackfile.Stack, key stackfile.NodeKey) (bool, error) {
	da, err := digestOf(a, key)
	if err != nil {
		return false, err
	}
	db, err := digestOf(b, key)
	return da == db, err
}
