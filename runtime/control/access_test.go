package control

import (
	"errors"
	"testing"
)

// TestSEC1AccessDecision is the peer check's pure core over every kind of
// peer: root, the daemon's uid, the group by gid, the group by the user
// database, and strangers, with and without a configured group.
func TestSEC1AccessDecision(t *testing.T) {
	db := map[uint32][]string{
		1001: {"1001", "500"}, // a member of group 500 through /etc/group
		1002: {"1002"},
	}
	groupsOf := func(uid uint32) ([]string, error) {
		g, ok := db[uid]
		if !ok {
			return nil, errors.New("unknown user")
		}
		return g, nil
	}
	withGroup := access{self: 900, group: 500, hasGroup: true, groupsOf: groupsOf}
	noGroup := access{self: 900, groupsOf: groupsOf}
	cases := []struct {
		name string
		acc  access
		peer Peer
		want bool
	}{
		{"root", noGroup, Peer{UID: 0, GID: 0}, true},
		{"root with a group", withGroup, Peer{UID: 0, GID: 7}, true},
		{"daemon's uid", noGroup, Peer{UID: 900, GID: 900}, true},
		{"stranger, no group", noGroup, Peer{UID: 1001, GID: 500}, false},
		{"gid is the group", withGroup, Peer{UID: 1002, GID: 500}, true},
		{"member by the user database", withGroup, Peer{UID: 1001, GID: 1001}, true},
		{"not a member", withGroup, Peer{UID: 1002, GID: 1002}, false},
		{"unknown user", withGroup, Peer{UID: 4242, GID: 4242}, false},
	}
	for _, tc := range cases {
		got, why := tc.acc.allows(tc.peer)
		if got != tc.want {
			t.Errorf("%s: allows = %v (%s), want %v", tc.name, got, why, tc.want)
		}
		if !got && why == "" {
			t.Errorf("%s: a refusal without a reason", tc.name)
		}
	}
}
