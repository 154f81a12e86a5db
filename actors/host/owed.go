package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/lease"
	"github.com/engenho/engenho/messages"
)

// ReleaseOwed retries an owed lease release (ACT-8) without the Lease that
// failed to release it: by another incarnation of the host actor, or the
// next daemon run. It writes the released record only over the very record
// the holder last wrote (a put conditional on the owed ETag), so it can
// never release a lease renewed or taken since. settled is true when
// nothing is owed any more: the release landed, the lease expired, or
// someone else wrote it since.
func ReleaseOwed(ctx context.Context, store objstore.Store, prefix string, owed messages.OwedRelease, now time.Time) (settled bool, err error) {
	if !owed.Expires.IsZero() && !now.Before(owed.Expires) {
		return true, nil // expired: anyone may take it now
	}
	key, err := lease.Key(prefix, owed.Host)
	if err != nil {
		return false, err
	}
	obj, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("owed release %s: reading the lease: %w", owed.Host, err)
	}
	data, rerr := io.ReadAll(io.LimitReader(obj.Body, 64<<10))
	obj.Body.Close()
	if rerr != nil {
		return false, fmt.Errorf("owed release %s: reading the lease: %w", owed.Host, rerr)
	}
	if obj.ETag != owed.ETag {
		return true, nil // renewed, taken over or released since
	}
	rec, err := lease.Decode(data)
	if err != nil || rec.Released {
		return true, nil
	}
	_, err = store.Put(ctx, key, bytes.NewReader(lease.ReleasedRecord(rec, now).Encode()), objstore.IfMatch(owed.ETag))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrPreconditionFailed):
		return true, nil // someone wrote it since we read it
	}
	return false, fmt.Errorf("owed release %s: %w", owed.Host, err)
}
