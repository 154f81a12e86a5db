// Package logging sets up the daemon's zerolog logger (spec DMN-17): JSON
// lines when stderr is not a terminal, a console format when it is, and a
// level that can be changed while running. It also routes the log/slog
// output of libraries (hollywood logs through slog) into the same logger.
//
// Layer: runtime. It imports nothing from the module.
package logging
