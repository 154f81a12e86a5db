// Package sqlitesnap takes consistent copies of SQLite databases that a
// workload may be writing (spec ACT-16): Is tells a database file by its
// 16-byte header, Copy writes a transactionally consistent snapshot of it
// with SQLite's own locking (VACUUM INTO through modernc.org/sqlite, a
// pure-Go SQLite), so a checkpoint never carries a torn database.
//
// Layer: drivers. It imports nothing from the module.
package sqlitesnap
