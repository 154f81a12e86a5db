package checkpoint

import (
	"hash"
	"io"
)

// readAhead is a three-stage pipeline over large chunks: one goroutine
// reads the body, a second hashes and counts it, the consumer (Read)
// extracts it. The download never waits for the hash or the disk, and
// the three run side by side.
type readAhead struct {
	hashQ chan []byte
	full  chan []byte
	free  chan []byte
	stop  chan struct{}
	done  chan struct{}
	body  io.ReadCloser

	// Written by the goroutine before it closes full.
	err error
	n   int64
	h   hash.Hash

	cur, curBuf []byte
}

const (
	readChunk = 1 << 20
	readDepth = 8
)

func newReadAhead(body io.ReadCloser, limit int64, h hash.Hash) *readAhead {
	ra := &readAhead{
		hashQ: make(chan []byte, readDepth), full: make(chan []byte, readDepth), free: make(chan []byte, readDepth),
		stop: make(chan struct{}), done: make(chan struct{}), body: body, h: h,
	}
	for range readDepth {
		ra.free <- make([]byte, readChunk)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		ra.read(io.LimitReader(body, limit))
	}()
	go func() {
		defer close(ra.done)
		ra.hash()
		<-read
	}()
	return ra
}

// hash is the middle stage; it closes full when the reader is done.
func (ra *readAhead) hash() {
	defer close(ra.full)
	for buf := range ra.hashQ {
		ra.h.Write(buf)
		ra.n += int64(len(buf))
		select {
		case ra.full <- buf:
		case <-ra.stop:
			return
		}
	}
}

// read is the first stage; it records the body's error, then closes
// hashQ.
func (ra *readAhead) read(r io.Reader) {
	defer close(ra.hashQ)
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			select {
			case ra.hashQ <- buf[:n]:
			case <-ra.stop:
				return
			}
		}
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				ra.err = err
			}
			return
		}
	}
}

// Read hands out the chunks in order; after the last it returns the
// body's error or io.EOF.
func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.curBuf != nil {
			ra.free <- ra.curBuf[:cap(ra.curBuf)]
			ra.curBuf = nil
		}
		buf, ok := <-ra.full
		if !ok {
			if ra.err != nil {
				return 0, ra.err
			}
			return 0, io.EOF
		}
		ra.cur, ra.curBuf = buf, buf
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// drain reads to the end, so count and hash cover the whole body.
func (ra *readAhead) drain() error {
	_, err := io.Copy(io.Discard, ra)
	return err
}

// total is the byte count and hash; valid once Read returned io.EOF.
func (ra *readAhead) total() (int64, hash.Hash) { return ra.n, ra.h }

// Close stops the goroutines (closing the body unblocks a pending read)
// and waits for them.
func (ra *readAhead) Close() error {
	close(ra.stop)
	err := ra.body.Close()
	<-ra.done
	return err
}
