package daemon

import "github.com/engenho/engenho/runtime/journal"

// testWho is the requester of deployer calls in unit tests.
var testWho = journal.Who{UID: 0, User: "root"}
