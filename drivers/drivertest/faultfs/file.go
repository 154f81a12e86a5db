package faultfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// file is an open loopback file whose writes, syncs, allocations and
// attribute changes fail while the file system fails writes.
type file struct {
	*fs.LoopbackFile
	fs *FS
}

// wrap makes an open file one of ours (nil stays nil).
func (f *FS) wrap(fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	return &file{LoopbackFile: lf, fs: f}
}

// unwrap is the loopback file under one of ours, for the loopback's own
// methods that look inside the handle they are given.
func unwrap(fh fs.FileHandle) fs.FileHandle {
	if f, ok := fh.(*file); ok {
		return f.LoopbackFile
	}
	return fh
}

// PassthroughFd says no: with kernel passthrough the writes would reach
// the backing file without asking us.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if f.fs.refuse() {
		return 0, syscall.EIO
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if f.fs.refuse() {
		return 0, syscall.EIO
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if f.fs.refuse() {
		return syscall.EIO
	}
	return f.LoopbackFile.Fsync(ctx, flags)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if f.fs.refuse() {
		return syscall.EIO
	}
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f.fs.refuse() {
		return syscall.EIO
	}
	return f.LoopbackFile.Setattr(ctx, in, out)
}
