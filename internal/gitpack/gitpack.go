// Package gitpack reads the packfile that a client sends to git-receive-pack
// and returns the commit and tree objects in it, so that a gateway in front of
// the git server can look at commit messages and changed directories before
// the push reaches the repository.
//
// The pack is read as a stream in one pass. Only the content of commits and
// trees is kept in memory (they are what the caller inspects, and later deltas
// may be built on them); blobs and tags are hashed on the fly and dropped.
// Deltas are resolved when their base is an earlier object of the same pack.
//
// The package is pure: it does no I/O beyond reading the io.Reader it is given.
// All failures are reported through three sentinel errors, so that a caller can
// fail closed on any of them:
//
//   - [ErrMalformed]: the bytes are not a valid pack (including a bad checksum
//     or a truncated stream).
//   - [ErrThinPack]: a delta names a base object that is not in the pack.
//   - [ErrTooLarge]: the pack is bigger than the [Limits] allow.
//
// Errors from the underlying reader itself (a broken connection, a timeout) are
// returned wrapped, without any of the sentinels.
package gitpack

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
)

// Hash is the object format of a repository: it decides both how object ids
// are computed and which checksum ends the pack.
type Hash int

const (
	// SHA1 is git's default object format, with 20-byte ids.
	SHA1 Hash = iota
	// SHA256 is the format of repositories created with
	// --object-format=sha256, with 32-byte ids.
	SHA256
)

// size returns the length of a raw object id in bytes.
func (h Hash) size() int {
	if h == SHA256 {
		return sha256.Size
	}
	return sha1.Size
}

// new returns a fresh hash function of the format.
func (h Hash) new() hash.Hash {
	if h == SHA256 {
		return sha256.New()
	}
	return sha1.New()
}

var (
	// ErrMalformed reports input that is not a well-formed pack: a bad
	// header, a corrupt zlib stream, a size that does not match, an invalid
	// delta, an unparsable commit or tree, a wrong trailing checksum, or a
	// stream that ends too early.
	ErrMalformed = errors.New("gitpack: malformed pack")
	// ErrThinPack reports a REF_DELTA whose base object was not found among
	// the objects that precede it in the pack. Such a pack can only be
	// completed from the receiving repository, so its content cannot be
	// known from the pack alone.
	ErrThinPack = errors.New("gitpack: delta base not in pack")
	// ErrTooLarge reports a pack that exceeds one of the [Limits].
	ErrTooLarge = errors.New("gitpack: pack exceeds limits")
)

// Default limits, used for any field of [Limits] that is zero or negative.
const (
	DefaultMaxObjects    = 1_000_000
	DefaultMaxInflated   = 256 << 20
	DefaultMaxObjectSize = 512 << 20
)

// Limits bound the resources one call to [Read] may use. A field that is zero
// or negative takes its Default value.
type Limits struct {
	// MaxObjects is the largest object count the pack header may announce.
	MaxObjects int
	// MaxInflated bounds the inflated bytes of commits and trees (including
	// those produced by deltas) that are kept in memory for the whole call.
	// The returned Contents share this memory, so it also bounds their size,
	// apart from the decoded ids.
	MaxInflated int64
	// MaxObjectSize bounds the inflated size of any single object of any
	// type, as well as the size of a commit or tree rebuilt from a delta. It
	// also bounds the work spent inflating blobs, which are not kept.
	MaxObjectSize int64
}

// withDefaults fills in the fields that are not set.
func (l Limits) withDefaults() Limits {
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.MaxInflated <= 0 {
		l.MaxInflated = DefaultMaxInflated
	}
	if l.MaxObjectSize <= 0 {
		l.MaxObjectSize = DefaultMaxObjectSize
	}
	return l
}

// Commit is a commit object found in the pack.
type Commit struct {
	// ID is the object id in lowercase hex.
	ID string
	// Tree is the id of the commit's root tree, from its "tree" header.
	Tree string
	// Parents are the ids from the "parent" headers, in order.
	Parents []string
	// Message is everything after the first empty line, unchanged. It is
	// empty if the commit has no empty line.
	Message string
}

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	// Mode is the octal mode exactly as stored, for example "100644" or
	// "40000" (git writes directories without a leading zero).
	Mode string
	// Name is the entry's name; it is never empty and never contains '/'.
	Name string
	// ID is the entry's object id in lowercase hex.
	ID string
}

// Tree is a tree object found in the pack.
type Tree struct {
	// ID is the object id in lowercase hex.
	ID string
	// Entries are the tree's entries in stored order.
	Entries []TreeEntry
}

// Contents is what [Read] found in a pack.
type Contents struct {
	// Commits are the commit objects, in pack order. An object stored twice
	// is listed once.
	Commits []Commit
	// Trees are the tree objects, in pack order. An object stored twice is
	// listed once.
	Trees []Tree
	// Objects is the number of objects in the pack, of every type.
	Objects int
}

// Names of the parts of an object, for error messages.
const (
	partObject = "object data"
	partDelta  = "delta data"
)

// Pack object types, as stored in the object header.
type objType uint8

const (
	typeCommit   objType = 1
	typeTree     objType = 2
	typeBlob     objType = 3
	typeTag      objType = 4
	typeOfsDelta objType = 6
	typeRefDelta objType = 7
)

// String returns the name git uses for the type when hashing an object.
func (t objType) String() string {
	switch t {
	case typeCommit:
		return "commit"
	case typeTree:
		return "tree"
	case typeBlob:
		return "blob"
	case typeTag:
		return "tag"
	case typeOfsDelta:
		return "ofs-delta"
	case typeRefDelta:
		return "ref-delta"
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// kept reports whether objects of the type are held in memory.
func (t objType) kept() bool { return t == typeCommit || t == typeTree }

// Read reads one pack from r, starting at its "PACK" signature, and returns
// the commits and trees it contains. It verifies every object's size, every
// zlib checksum and the pack's trailing checksum; h selects the object format
// of both the ids and that checksum.
//
// Read stops right after the trailing checksum. If r implements
// io.ByteReader (a *bufio.Reader or a *bytes.Reader does), Read consumes
// exactly the pack's bytes and nothing after them; otherwise it reads r
// through its own buffer and may consume bytes that follow the pack.
//
// Deltas are resolved against earlier objects of the same pack, found by
// offset (OFS_DELTA) or by id (REF_DELTA). A REF_DELTA whose base is not an
// earlier object, which is what a thin pack contains, fails with
// [ErrThinPack]; Read does not look for bases that appear later, as git never
// writes a base after its delta. The same error is returned when the base is
// in the pack but is itself a delta on a blob or tag: the content of such
// objects is not kept, so their ids are unknown. Git only writes REF_DELTA
// for bases inside the pack when the receiver has not advertised the
// ofs-delta capability, which git-receive-pack advertises by default.
// A git client sends no thin pack to a receiver that advertises no-thin.
//
// Read stops at the first error and returns no partial result.
func Read(r io.Reader, h Hash, lim Limits) (*Contents, error) {
	p, err := read(r, h, lim)
	if err != nil {
		return nil, err
	}
	return &p.out, nil
}

// parser holds the state of one Read.
type parser struct {
	in  *packReader
	h   Hash
	lim Limits

	// objs lists every object read so far in pack order, which is also
	// increasing offset order, so OFS_DELTA bases are found by binary search.
	objs []object
	// byID maps the raw id of every object whose id is known to its index in
	// objs, for REF_DELTA bases and duplicate detection.
	byID map[string]int
	// kept counts the bytes of commit and tree content held in objs.
	kept int64

	zr  io.ReadCloser // zlib reader, reused through zlib.Resetter
	br  *bufio.Reader // buffer for reading delta instructions, reused
	buf []byte        // copy buffer for objects that are not kept

	// ofsDeltas and refDeltas count the deltas of each kind; tests use them
	// to check that the packs they build exercise both code paths.
	ofsDeltas, refDeltas int

	out Contents
}

// object is what the parser remembers about an object it has read.
type object struct {
	off  int64   // offset of the object's header in the pack
	typ  objType // real type: never a delta type
	data string  // content, for commits and trees only
}

// read does the work of Read and returns the parser, whose counters the
// tests inspect.
func read(r io.Reader, h Hash, lim Limits) (*parser, error) {
	if h != SHA1 && h != SHA256 {
		return nil, fmt.Errorf("gitpack: unknown object format %d", int(h))
	}
	p := &parser{
		in:   newPackReader(r, h.new()),
		h:    h,
		lim:  lim.withDefaults(),
		byID: map[string]int{},
	}
	count, err := p.readHeader()
	if err != nil {
		return nil, err
	}
	p.objs = make([]object, 0, min(count, 4096))
	for i := range count {
		start := p.in.off
		if err := p.readObject(start); err != nil {
			return nil, fmt.Errorf("%w (object %d of %d, at offset %d)", err, i, count, start)
		}
	}
	if err := p.in.checkTrailer(); err != nil {
		return nil, err
	}
	p.out.Objects = count
	return p, nil
}

// readHeader reads the 12-byte pack header and returns the object count.
func (p *parser) readHeader() (int, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(p.in, hdr[:]); err != nil {
		return 0, p.in.wrap(err, "pack header")
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return 0, fmt.Errorf("%w: no PACK signature", ErrMalformed)
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return 0, fmt.Errorf("%w: unsupported version %d", ErrMalformed, v)
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	if uint64(count) > uint64(p.lim.MaxObjects) {
		return 0, fmt.Errorf("%w: %d objects, at most %d allowed", ErrTooLarge, count, p.lim.MaxObjects)
	}
	return int(count), nil
}

// readObject reads the object that starts at offset start, resolves it if
// it is a delta, and records it.
func (p *parser) readObject(start int64) error {
	typ, size, err := p.readObjectHeader()
	if err != nil {
		return err
	}
	if size > uint64(p.lim.MaxObjectSize) {
		return fmt.Errorf("%w: %s of %d bytes, at most %d allowed", ErrTooLarge, typ, size, p.lim.MaxObjectSize)
	}
	var (
		obj object
		id  []byte
	)
	switch typ {
	case typeCommit, typeTree, typeBlob, typeTag:
		obj, id, err = p.readWhole(typ, int64(size))
	case typeOfsDelta:
		p.ofsDeltas++
		var base *object
		if base, err = p.ofsBase(start); err == nil {
			obj, id, err = p.readDelta(base, int64(size))
		}
	case typeRefDelta:
		p.refDeltas++
		var base *object
		if base, err = p.refBase(); err == nil {
			obj, id, err = p.readDelta(base, int64(size))
		}
	default:
		// Not reached: readObjectHeader rejects the two unused types.
		err = fmt.Errorf("%w: invalid object type %d", ErrMalformed, uint8(typ))
	}
	if err != nil {
		return err
	}
	obj.off = start
	return p.record(obj, id)
}

// readObjectHeader decodes an object header: the type in bits 4-6 of the
// first byte, and the inflated size in the low four bits of the first byte
// followed by seven bits of every continuation byte, least significant first.
func (p *parser) readObjectHeader() (objType, uint64, error) {
	c, err := p.in.ReadByte()
	if err != nil {
		return 0, 0, p.in.wrap(err, "object header")
	}
	typ := objType(c >> 4 & 7)
	if typ == 0 || typ == 5 {
		return 0, 0, fmt.Errorf("%w: invalid object type %d", ErrMalformed, uint8(typ))
	}
	size := uint64(c & 0x0f)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 57 {
			return 0, 0, fmt.Errorf("%w: object size does not fit in 64 bits", ErrMalformed)
		}
		if c, err = p.in.ReadByte(); err != nil {
			return 0, 0, p.in.wrap(err, "object header")
		}
		size |= uint64(c&0x7f) << shift
	}
	return typ, size, nil
}

// readWhole reads an object stored whole (not as a delta) and returns it with
// its raw id. Commits and trees are kept; blobs and tags are only hashed.
func (p *parser) readWhole(typ objType, size int64) (object, []byte, error) {
	body, err := p.inflate(size)
	if err != nil {
		return object{}, nil, err
	}
	h := p.h.new()
	fmt.Fprintf(h, "%s %d\x00", typ, size)
	obj := object{typ: typ}
	if typ.kept() {
		if err := p.reserve(size); err != nil {
			return object{}, nil, err
		}
		var data bytes.Buffer
		data.Grow(int(min(size, 64<<10)))
		if _, err := data.ReadFrom(body); err != nil {
			return object{}, nil, p.in.wrap(err, partObject)
		}
		h.Write(data.Bytes())
		obj.data = data.String()
	} else if _, err := io.CopyBuffer(h, body, p.copyBuffer()); err != nil {
		return object{}, nil, p.in.wrap(err, partObject)
	}
	if err := body.finish(); err != nil {
		return object{}, nil, p.in.wrap(err, partObject)
	}
	return obj, h.Sum(nil), nil
}

// ofsBase reads the negative offset of an OFS_DELTA and returns the object
// that starts there. Git encodes the offset big-endian in groups of seven
// bits and adds one for every continuation byte, so that each length has its
// own range of values.
func (p *parser) ofsBase(start int64) (*object, error) {
	c, err := p.in.ReadByte()
	if err != nil {
		return nil, p.in.wrap(err, "delta offset")
	}
	dist := uint64(c & 0x7f)
	for c&0x80 != 0 {
		if dist >= 1<<56 {
			return nil, fmt.Errorf("%w: delta offset does not fit in 64 bits", ErrMalformed)
		}
		if c, err = p.in.ReadByte(); err != nil {
			return nil, p.in.wrap(err, "delta offset")
		}
		dist = (dist+1)<<7 | uint64(c&0x7f)
	}
	if dist == 0 || dist > uint64(start) {
		return nil, fmt.Errorf("%w: delta offset %d out of range", ErrMalformed, dist)
	}
	at := start - int64(dist)
	i, found := slices.BinarySearchFunc(p.objs, at, func(o object, off int64) int {
		switch {
		case o.off < off:
			return -1
		case o.off > off:
			return 1
		}
		return 0
	})
	if !found {
		return nil, fmt.Errorf("%w: no object at delta base offset %d", ErrMalformed, at)
	}
	return &p.objs[i], nil
}

// refBase reads the base id of a REF_DELTA and returns that object if an
// earlier object of the pack has it.
func (p *parser) refBase() (*object, error) {
	id := make([]byte, p.h.size())
	if _, err := io.ReadFull(p.in, id); err != nil {
		return nil, p.in.wrap(err, "delta base id")
	}
	i, ok := p.byID[string(id)]
	if !ok {
		return nil, fmt.Errorf("%w: base %x", ErrThinPack, id)
	}
	return &p.objs[i], nil
}

// readDelta reads a delta on base. A delta's result has its base's type. For
// a commit or tree base the delta is applied and the result returned with its
// id; otherwise the delta is only consumed, as neither the result's content
// nor its id is needed, and the returned id is nil.
func (p *parser) readDelta(base *object, size int64) (object, []byte, error) {
	body, err := p.inflate(size)
	if err != nil {
		return object{}, nil, err
	}
	if !base.typ.kept() {
		if _, err := io.CopyBuffer(io.Discard, body, p.copyBuffer()); err != nil {
			return object{}, nil, p.in.wrap(err, partDelta)
		}
		if err := body.finish(); err != nil {
			return object{}, nil, p.in.wrap(err, partDelta)
		}
		return object{typ: base.typ}, nil, nil
	}
	if p.br == nil {
		p.br = bufio.NewReaderSize(body, 4096)
	} else {
		p.br.Reset(body)
	}
	data, err := p.applyDelta(base.data, p.br)
	if err != nil {
		return object{}, nil, err
	}
	if err := body.finish(); err != nil {
		return object{}, nil, p.in.wrap(err, partDelta)
	}
	h := p.h.new()
	fmt.Fprintf(h, "%s %d\x00", base.typ, len(data))
	h.Write(data)
	return object{typ: base.typ, data: string(data)}, h.Sum(nil), nil
}

// record remembers obj and, for a commit or tree, parses it into the result.
// An id seen before must name the same content; a second copy is not listed
// again.
func (p *parser) record(obj object, id []byte) error {
	if id != nil {
		if i, dup := p.byID[string(id)]; dup {
			if prev := p.objs[i]; prev.typ != obj.typ || prev.data != obj.data {
				return fmt.Errorf("%w: two different objects with id %x", ErrMalformed, id)
			}
			p.objs = append(p.objs, obj)
			return nil
		}
		p.byID[string(id)] = len(p.objs)
	}
	p.objs = append(p.objs, obj)
	switch obj.typ {
	case typeCommit:
		c, err := parseCommit(obj.data, p.h)
		if err != nil {
			return err
		}
		c.ID = hex.EncodeToString(id)
		p.out.Commits = append(p.out.Commits, c)
	case typeTree:
		entries, err := parseTree(obj.data, p.h)
		if err != nil {
			return err
		}
		p.out.Trees = append(p.out.Trees, Tree{ID: hex.EncodeToString(id), Entries: entries})
	}
	return nil
}

// reserve accounts for n more bytes of kept content.
func (p *parser) reserve(n int64) error {
	if n > p.lim.MaxInflated-p.kept {
		return fmt.Errorf("%w: more than %d bytes of commits and trees", ErrTooLarge, p.lim.MaxInflated)
	}
	p.kept += n
	return nil
}

// copyBuffer returns the buffer used to stream objects that are not kept.
func (p *parser) copyBuffer() []byte {
	if p.buf == nil {
		p.buf = make([]byte, 32<<10)
	}
	return p.buf
}
