package incus

import (
	"bytes"
	"context"
	"io"

	"github.com/engenho/engenho/drivers"
)

// Logs returns the container's output. For a container running a Command
// that is the entrypoint's output log (stdout and stderr together, in the
// order written; the rotated output.log.1 first), read through incus's
// files API whether the container runs or not. A container on its image's
// own init has no such file: its console log is returned instead, which
// incusd hands out only once while the container runs (what was written
// since the previous read).
//
// Follow keeps the reader open, polling the log every PollInterval for new
// bytes, until ctx ends or the reader is closed.
func (d *Driver) Logs(ctx context.Context, name string, opts drivers.LogOptions) (io.ReadCloser, error) {
	if err := checkName("logs", name); err != nil {
		return nil, err
	}
	in, err := d.instance(ctx, name)
	if err != nil {
		return nil, d.fail("logs", name, err)
	}
	if !hasEntrypoint(in) {
		b, err := d.c.ConsoleLog(ctx, name)
		if err != nil {
			return nil, d.fail("logs", name, err)
		}
		return io.NopCloser(bytes.NewReader(drivers.TailLines(b, opts.Tail))), nil
	}
	old, err := d.readLog(ctx, name, outputName+".1", 0)
	if err != nil {
		return nil, d.fail("logs", name, err)
	}
	cur, err := d.readLog(ctx, name, outputName, 0)
	if err != nil {
		return nil, d.fail("logs", name, err)
	}
	all := append(old.Data, cur.Data...)
	first := drivers.TailLines(all, opts.Tail)
	if !opts.Follow {
		return io.NopCloser(bytes.NewReader(first)), nil
	}
	offset := max(cur.Size, int64(len(cur.Data)))
	return d.follow(ctx, name, first, offset), nil
}

// readLog reads a file of the state directory from offset; a file that
// does not exist (yet) reads as empty. See readFile for incusd's failures.
func (d *Driver) readLog(ctx context.Context, name, file string, offset int64) (FileRange, error) {
	fr, err := d.readFile(ctx, name, stateDir+"/"+file, offset)
	if IsNotFound(err) {
		return FileRange{Size: 0}, nil
	}
	return fr, err
}

// follow streams first, then whatever is appended to the output log.
func (d *Driver) follow(ctx context.Context, name string, first []byte, offset int64) io.ReadCloser {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	// Ending ctx (or Close) unblocks a Write the reader is not taking.
	context.AfterFunc(ctx, func() { pw.Close() })
	go func() {
		defer cancel()
		if _, err := pw.Write(first); err != nil {
			return
		}
		for {
			t := d.clock.NewTimer(d.opts.PollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			fr, err := d.readLog(ctx, name, outputName, offset)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Debug().Err(err).Str("instance", name).Msg("following logs: read failed, retrying")
				}
				continue
			}
			if fr.Size >= 0 && fr.Size < offset {
				offset = 0 // rotated (truncated): start again from its top
				continue
			}
			if len(fr.Data) > 0 {
				offset += int64(len(fr.Data))
				if _, err := pw.Write(fr.Data); err != nil {
					return
				}
			}
		}
	}()
	return &followReader{PipeReader: pr, cancel: cancel}
}

type followReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *followReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}
