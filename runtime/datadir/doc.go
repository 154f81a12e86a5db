// Package datadir is the one place that knows the daemon's data directory
// layout (spec DMN-1..DMN-4, DMN-14) and keeps its markers:
//
//	DATA/
//	  control/          0700
//	    lock            exclusive flock of the daemon, holds its pid (DMN-2)
//	    run.json        run marker: live (pid, phase, started_at) or released (DMN-3)
//	    hold            hold marker written by stop --hold (DMN-4)
//	    engenho.sock    control socket (DMN-11)
//	  node.key          0600, the node key: secret env values at rest are
//	                    sealed with it (runtime/nodekey, SEC-2)
//	  journal/          badger journal (DMN-10)
//	  instances/        per-instance files of the process driver
//	  logs/             workload logs
//	  hosts/            hibernating hosts' local state
//	  attic/TIMESTAMP/  what reinit moved aside, never deleted (DMN-14)
//
// Markers are written atomically (temp file, fsync, rename, fsync of the
// directory), so a crash leaves either the old or the new marker. Every
// change (markers, attic moves) requires holding the lock; reads do not.
//
// Layer: runtime. It imports drivers/clock only.
package datadir
