package control

import (
	"context"
	"fmt"
	"net"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a connection, from SO_PEERCRED:
// its credentials when it connected.
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}

type peerKey struct{}

func withPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the credentials of the client whose request ctx
// belongs to; false outside a request of the socket.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// UserName is the name the user database gives uid, or "" when it has
// none.
func UserName(uid uint32) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.Username
}

// peerOf reads the peer credentials of a unix connection.
func peerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

// access is who may use the socket (DMN-11, SEC-1): root, the daemon's own
// uid, and members of the configured group.
type access struct {
	self uint32
	// group is the configured group's gid; hasGroup is false when none is.
	group    uint32
	hasGroup bool
	// groupsOf lists a uid's groups (gids, as decimal strings), primary
	// and supplementary; os/user in production, a table in tests.
	groupsOf func(uid uint32) ([]string, error)
}

// allows decides whether p may talk to the daemon, and why not. A member of
// the group is a peer whose gid is the group, or whose uid's groups (from
// the user database) include it.
func (a access) allows(p Peer) (bool, string) {
	switch {
	case p.UID == 0:
		return true, ""
	case p.UID == a.self:
		return true, ""
	case !a.hasGroup:
		return false, "not root and not the daemon's user"
	case p.GID == a.group:
		return true, ""
	}
	groups, err := a.groupsOf(p.UID)
	if err != nil {
		return false, fmt.Sprintf("not root, not the daemon's user, and its groups could not be read: %v", err)
	}
	if slices.Contains(groups, strconv.FormatUint(uint64(a.group), 10)) {
		return true, ""
	}
	return false, "not root, not the daemon's user, not in the socket's group"
}

// userGroups lists uid's group ids from the user database.
func userGroups(uid uint32) ([]string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, err
	}
	return u.GroupIds()
}

// resolveGroup reads a group name or numeric gid.
func resolveGroup(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		var byID error
		g, byID = user.LookupGroupId(name)
		if byID != nil {
			return 0, fmt.Errorf("group %s: %w", quote(name), err)
		}
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %s: gid %q: %w", quote(name), g.Gid, err)
	}
	return uint32(gid), nil
}
