package chaos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
)

// checkCasCheckpoint is checkCheckpoint for an incremental checkpoint
// (ACT-15): the index and the count file's blob must match their sha256,
// and the count must be the last acknowledged visit (CHS-3).
func (p *hostPair) checkCasCheckpoint(ctx context.Context, cp *checkpoint.Checkpointer, cur checkpoint.Entry) []invariant.Violation {
	bad := func(format string, args ...any) []invariant.Violation {
		return []invariant.Violation{{Invariant: invariant.CheckpointIntact, Subject: hostName, Safety: true, Evidence: fmt.Sprintf(format, args...)}}
	}
	data, err := cp.ReadFile(ctx, hostName, cur, "count")
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil // no visit yet
	}
	if err != nil {
		return bad("the current checkpoint %s: %v", cur.Key, err)
	}
	count, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if p.ambiguous == 0 && count != p.lastVisit {
		return bad("the current checkpoint %s holds visit %d, the last acknowledged visit is %d", cur.Key, count, p.lastVisit)
	}
	return nil
}
