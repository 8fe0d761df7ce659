package gitpack

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// applyDelta rebuilds an object from its base and the instructions read from
// d, which must end exactly where the instructions end.
//
// Git's delta format starts with the base's size and the result's size, each
// a little-endian varint of seven bits per byte. Then come instructions, each
// introduced by one byte:
//
//   - high bit set: copy a range of the base. Bits 0-3 say which of four
//     little-endian offset bytes follow, bits 4-6 which of three size bytes
//     follow; absent bytes are zero, and a size of zero means 0x10000.
//   - 1 to 127: insert that many bytes, which follow the instruction.
//   - 0: reserved, and rejected.
//
// The result's size counts against the limits before any of it is built, and
// the result is built as instructions arrive rather than allocated up front,
// so a short delta cannot claim a large allocation.
func (p *parser) applyDelta(base string, d *bufio.Reader) ([]byte, error) {
	srcSize, err := p.deltaVarint(d)
	if err != nil {
		return nil, err
	}
	if srcSize != uint64(len(base)) {
		return nil, fmt.Errorf("%w: delta expects a base of %d bytes, base has %d", ErrMalformed, srcSize, len(base))
	}
	dstSize, err := p.deltaVarint(d)
	if err != nil {
		return nil, err
	}
	if dstSize > uint64(p.lim.MaxObjectSize) {
		return nil, fmt.Errorf("%w: delta result of %d bytes, at most %d allowed", ErrTooLarge, dstSize, p.lim.MaxObjectSize)
	}
	if err := p.reserve(int64(dstSize)); err != nil {
		return nil, err
	}
	want := int(dstSize)
	out := make([]byte, 0, min(want, 64<<10))
	for {
		cmd, err := d.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, p.in.wrap(err, partDelta)
		}
		switch {
		case cmd&0x80 != 0:
			off, n, err := p.copyArgs(cmd, d)
			if err != nil {
				return nil, err
			}
			if off+n > uint64(len(base)) {
				return nil, fmt.Errorf("%w: delta copies %d bytes at %d from a base of %d bytes", ErrMalformed, n, off, len(base))
			}
			if n > uint64(want-len(out)) {
				return nil, fmt.Errorf("%w: delta result exceeds its declared %d bytes", ErrMalformed, want)
			}
			out = append(out, base[off:off+n]...)
		case cmd != 0:
			n := int(cmd)
			if n > want-len(out) {
				return nil, fmt.Errorf("%w: delta result exceeds its declared %d bytes", ErrMalformed, want)
			}
			out = slices.Grow(out, n)[:len(out)+n]
			if _, err := io.ReadFull(d, out[len(out)-n:]); err != nil {
				return nil, p.in.wrap(noEOF(err), partDelta)
			}
		default:
			return nil, fmt.Errorf("%w: reserved delta instruction 0", ErrMalformed)
		}
	}
	if len(out) != want {
		return nil, fmt.Errorf("%w: delta result has %d bytes, declared %d", ErrMalformed, len(out), want)
	}
	return out, nil
}

// copyArgs reads the offset and size bytes that follow a copy instruction.
func (p *parser) copyArgs(cmd byte, d *bufio.Reader) (off, n uint64, err error) {
	// Bits 0-3 select offset bytes 0-3, bits 4-6 size bytes 0-2.
	for i := range 7 {
		if cmd&(1<<i) == 0 {
			continue
		}
		c, err := d.ReadByte()
		if err != nil {
			return 0, 0, p.in.wrap(noEOF(err), "delta copy instruction")
		}
		if i < 4 {
			off |= uint64(c) << (8 * i)
		} else {
			n |= uint64(c) << (8 * (i - 4))
		}
	}
	if n == 0 {
		n = 0x10000
	}
	return off, n, nil
}

// deltaVarint reads one of the two sizes at the start of a delta.
func (p *parser) deltaVarint(d *bufio.Reader) (uint64, error) {
	var v uint64
	for shift := 0; ; shift += 7 {
		if shift > 56 {
			return 0, fmt.Errorf("%w: delta size does not fit in 63 bits", ErrMalformed)
		}
		c, err := d.ReadByte()
		if err != nil {
			return 0, p.in.wrap(noEOF(err), "delta header")
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

// noEOF turns io.EOF, which inside a delta means it was cut short, into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
