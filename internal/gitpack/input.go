package gitpack

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"hash"
	"io"
)

// byteReader is what compress/flate needs to read a deflate stream without
// reading past its end.
type byteReader interface {
	io.Reader
	io.ByteReader
}

// packReader reads the raw pack bytes. It hashes every byte it hands out, for
// the trailing checksum, and counts them, for OFS_DELTA offsets.
//
// Because packReader implements io.ByteReader, compress/zlib and
// compress/flate read through it one byte at a time and stop exactly at the
// end of each object's zlib stream, so the next object starts at the next
// byte.
type packReader struct {
	r   byteReader
	sum hash.Hash
	off int64 // bytes handed out so far

	// pending holds bytes handed out by ReadByte and not yet hashed; hashing
	// them in batches is much cheaper than one Write per byte.
	pending [4096]byte
	npend   int

	err   error // sticky: once reading fails, it keeps failing
	ioErr error // the underlying reader's own error, if that was the cause
}

// newPackReader reads from r directly if it is an io.ByteReader, and through
// a buffer otherwise.
func newPackReader(r io.Reader, sum hash.Hash) *packReader {
	br, ok := r.(byteReader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &packReader{r: br, sum: sum}
}

// ReadByte implements io.ByteReader.
func (p *packReader) ReadByte() (byte, error) {
	if p.err != nil {
		return 0, p.err
	}
	c, err := p.r.ReadByte()
	if err != nil {
		return 0, p.fail(err)
	}
	p.pending[p.npend] = c
	p.npend++
	if p.npend == len(p.pending) {
		p.flush()
	}
	p.off++
	return c, nil
}

// Read implements io.Reader.
func (p *packReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.r.Read(b)
	p.flush()
	p.sum.Write(b[:n])
	p.off += int64(n)
	if err != nil {
		return n, p.fail(err)
	}
	return n, nil
}

// flush hashes the pending bytes.
func (p *packReader) flush() {
	p.sum.Write(p.pending[:p.npend])
	p.npend = 0
}

// fail records a read error. A pack never ends before its trailer has been
// read, so the end of input is always unexpected.
func (p *packReader) fail(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	} else if !errors.Is(err, io.ErrUnexpectedEOF) {
		p.ioErr = err
	}
	p.err = err
	return err
}

// wrap turns an error met while reading part of the pack into the error Read
// returns: the underlying reader's error if it failed, otherwise ErrMalformed
// (the stream ended early, or zlib found it corrupt).
func (p *packReader) wrap(err error, what string) error {
	if p.ioErr != nil {
		return fmt.Errorf("gitpack: reading %s: %w", what, p.ioErr)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated in %s", ErrMalformed, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
}

// checkTrailer reads the checksum that ends the pack and compares it with
// the hash of everything before it. It reads nothing after the checksum.
func (p *packReader) checkTrailer() error {
	p.flush()
	want := p.sum.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(p, got); err != nil {
		return p.wrap(err, "trailing checksum")
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w: trailing checksum %x, computed %x", ErrMalformed, got, want)
	}
	return nil
}

// errSizeMismatch reports an object whose inflated data is shorter or longer
// than its header says.
var errSizeMismatch = errors.New("inflated size differs from the object header")

// body reads the inflated data of one object, enforcing the size from the
// object header.
type body struct {
	z    io.Reader
	left int64
}

// inflate starts reading the zlib stream of an object of the given inflated
// size. The zlib reader is reused from object to object.
func (p *parser) inflate(size int64) (*body, error) {
	var err error
	if p.zr == nil {
		p.zr, err = zlib.NewReader(p.in)
	} else {
		err = p.zr.(zlib.Resetter).Reset(p.in, nil)
	}
	if err != nil {
		return nil, p.in.wrap(err, "zlib header")
	}
	return &body{z: p.zr, left: size}, nil
}

// Read implements io.Reader. It returns io.EOF once size bytes have been
// read, and errSizeMismatch if the stream ends before.
func (b *body) Read(q []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if int64(len(q)) > b.left {
		q = q[:b.left]
	}
	n, err := b.z.Read(q)
	b.left -= int64(n)
	if err == io.EOF {
		if b.left > 0 {
			return n, errSizeMismatch
		}
		err = nil
	}
	return n, err
}

// finish checks that the object's data has all been read and that the zlib
// stream ends right there. Reading to the end also makes zlib consume and
// verify its Adler-32 checksum, which leaves the pack reader at the next
// object.
func (b *body) finish() error {
	if b.left != 0 {
		return errSizeMismatch
	}
	var one [1]byte
	for {
		n, err := b.z.Read(one[:])
		if n > 0 {
			return errSizeMismatch
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
