package gitpack

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// --- real repositories ---------------------------------------------------------------

// repo is a scratch repository driven by the real git binary, with an
// isolated configuration and fixed identities and dates, so that runs are
// reproducible.
type repo struct {
	tb     testing.TB
	dir    string
	format Hash
	env    []string
	clock  int
}

// newRepo creates an empty repository in a temporary directory.
func newRepo(tb testing.TB, format Hash) *repo {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Fatalf("these tests build packs with the git binary: %v", err)
	}
	dir := tb.TempDir()
	env := []string{
		"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.invalid",
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.invalid",
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	r := &repo{tb: tb, dir: filepath.Join(dir, "repo"), format: format, env: env}
	objectFormat := "sha1"
	if format == SHA256 {
		objectFormat = "sha256"
	}
	r.run("", "-C", dir, "init", "-q", "--object-format="+objectFormat, "-b", "main", "repo")
	return r
}

// git runs git in the repository and returns its standard output; it fails
// the test if git fails.
func (r *repo) git(stdin string, args ...string) string {
	r.tb.Helper()
	return r.run(stdin, append([]string{"-C", r.dir}, args...)...)
}

func (r *repo) run(stdin string, args ...string) string {
	r.tb.Helper()
	out, stderr, err := r.try(stdin, args...)
	if err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// try runs git and returns its output and error without judging them.
func (r *repo) try(stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command("git", args...)
	date := fmt.Sprintf("%d +0000", 1700000000+r.clock)
	cmd.Env = slices.Concat(r.env, []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date})
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// commit writes files (a path relative to the work tree, and its content) and
// commits them with exactly msg as the message. It returns the commit id.
func (r *repo) commit(msg string, files map[string]string) string {
	r.tb.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.tb.Fatal(err)
		}
	}
	r.clock += 60
	r.git("", "add", "-A")
	r.git(msg, "commit", "-q", "--allow-empty", "--allow-empty-message", "--cleanup=verbatim", "-F", "-")
	return r.head()
}

func (r *repo) head() string {
	r.tb.Helper()
	return strings.TrimSpace(r.git("", "rev-parse", "HEAD"))
}

// packToFile runs git pack-objects with args, feeding it stdin, and returns
// the path of the .pack it wrote. git also writes the .idx next to it.
func (r *repo) packToFile(stdin string, args ...string) string {
	r.tb.Helper()
	base := filepath.Join(r.tb.TempDir(), "out")
	name := strings.TrimSpace(r.git(stdin, append(append([]string{"pack-objects", "-q"}, args...), base)...))
	return base + "-" + name + ".pack"
}

// packedObject is one line of `git verify-pack -v`.
type packedObject struct {
	id, typ string
	delta   bool // stored as a delta
}

// verifyPack lists the objects of a pack file as git sees them.
func (r *repo) verifyPack(pack string) []packedObject {
	r.tb.Helper()
	idx := strings.TrimSuffix(pack, ".pack") + ".idx"
	var objs []packedObject
	for _, line := range strings.Split(r.git("", "verify-pack", "-v", idx), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || (f[1] != "commit" && f[1] != "tree" && f[1] != "blob" && f[1] != "tag") {
			continue
		}
		objs = append(objs, packedObject{id: f[0], typ: f[1], delta: len(f) == 7})
	}
	return objs
}

// expectedCommit reads a commit as git reports it.
func (r *repo) expectedCommit(id string) Commit {
	r.tb.Helper()
	tree := strings.TrimSpace(r.git("", "rev-parse", id+"^{tree}"))
	parents := strings.Fields(r.git("", "rev-list", "--parents", "-n1", id))[1:]
	if len(parents) == 0 {
		parents = nil
	}
	raw := r.git("", "cat-file", "commit", id)
	_, msg, _ := strings.Cut(raw, "\n\n")
	return Commit{ID: id, Tree: tree, Parents: parents, Message: msg}
}

// expectedTree reads a tree as git reports it. `git ls-tree` prints modes
// zero-padded to six digits, so they are compared as numbers.
func (r *repo) expectedTree(id string) Tree {
	r.tb.Helper()
	t := Tree{ID: id}
	for _, rec := range strings.Split(r.git("", "ls-tree", "-z", id), "\x00") {
		if rec == "" {
			continue
		}
		meta, name, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		t.Entries = append(t.Entries, TreeEntry{Mode: f[0], Name: name, ID: f[2]})
	}
	return t
}

// sameMode compares two octal modes by value.
func sameMode(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 8, 32)
	y, err2 := strconv.ParseUint(b, 8, 32)
	return err1 == nil && err2 == nil && x == y
}

// checkAgainstGit compares what Read found in a pack with what git reports
// for the same objects: the same commits and trees, in the same order as
// verify-pack lists them, with the same content.
func checkAgainstGit(t *testing.T, r *repo, pack string, got *Contents) {
	t.Helper()
	objs := r.verifyPack(pack)
	if got.Objects != len(objs) {
		t.Errorf("Objects = %d, git verify-pack lists %d", got.Objects, len(objs))
	}
	var commits, trees []string
	for _, o := range objs {
		switch o.typ {
		case "commit":
			commits = append(commits, o.id)
		case "tree":
			trees = append(trees, o.id)
		}
	}
	if len(got.Commits) != len(commits) {
		t.Fatalf("got %d commits, pack has %d", len(got.Commits), len(commits))
	}
	for i, c := range got.Commits {
		want := r.expectedCommit(commits[i])
		if c.ID != want.ID || c.Tree != want.Tree || fmt.Sprint(c.Parents) != fmt.Sprint(want.Parents) || c.Message != want.Message {
			t.Errorf("commit %d:\n got %+v\nwant %+v", i, c, want)
		}
	}
	if len(got.Trees) != len(trees) {
		t.Fatalf("got %d trees, pack has %d", len(got.Trees), len(trees))
	}
	for i, tr := range got.Trees {
		want := r.expectedTree(trees[i])
		if tr.ID != want.ID || len(tr.Entries) != len(want.Entries) {
			t.Errorf("tree %d:\n got %+v\nwant %+v", i, tr, want)
			continue
		}
		for j, e := range tr.Entries {
			w := want.Entries[j]
			if e.Name != w.Name || e.ID != w.ID || !sameMode(e.Mode, w.Mode) {
				t.Errorf("tree %s entry %d: got %+v, want %+v", tr.ID, j, e, w)
			}
		}
	}
}

// --- hand-built packs ------------------------------------------------------------------

// builder writes packs byte by byte, to reach cases git never produces.
type builder struct {
	h     Hash
	body  bytes.Buffer // the objects, without the 12-byte header
	count int
}

// off is the pack offset the next object will have.
func (b *builder) off() int64 { return int64(12 + b.body.Len()) }

// header writes an object header announcing typ and size.
func (b *builder) header(typ objType, size int) {
	c := byte(typ)<<4 | byte(size&0x0f)
	size >>= 4
	for size > 0 {
		b.body.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	b.body.WriteByte(c)
}

// deflate writes data as a zlib stream.
func (b *builder) deflate(data []byte) {
	w := zlib.NewWriter(&b.body)
	_, _ = w.Write(data)
	_ = w.Close()
}

// whole adds an object stored whole, announcing its true size, and returns
// its offset.
func (b *builder) whole(typ objType, data string) int64 {
	return b.raw(typ, len(data), []byte(data))
}

// raw adds an object whose header announces size, whatever data holds.
func (b *builder) raw(typ objType, size int, data []byte) int64 {
	off := b.off()
	b.header(typ, size)
	b.deflate(data)
	b.count++
	return off
}

// ofsDelta adds an OFS_DELTA on the object at base.
func (b *builder) ofsDelta(base int64, delta []byte) {
	off := b.off()
	b.header(typeOfsDelta, len(delta))
	dist := uint64(off - base)
	enc := []byte{byte(dist & 0x7f)}
	for dist >>= 7; dist > 0; dist >>= 7 {
		dist--
		enc = append([]byte{byte(dist&0x7f) | 0x80}, enc...)
	}
	b.body.Write(enc)
	b.deflate(delta)
	b.count++
}

// refDelta adds a REF_DELTA on the object with the given hex id.
func (b *builder) refDelta(base string, delta []byte) {
	b.header(typeRefDelta, len(delta))
	raw, err := hex.DecodeString(base)
	if err != nil {
		panic(err)
	}
	b.body.Write(raw)
	b.deflate(delta)
	b.count++
}

// pack returns the finished pack: header, objects and trailing checksum.
func (b *builder) pack() []byte { return b.packWith(2, uint32(b.count)) }

// packWith is pack with the given version and object count in the header.
func (b *builder) packWith(version, count uint32) []byte {
	var out bytes.Buffer
	out.WriteString("PACK")
	_ = binary.Write(&out, binary.BigEndian, version)
	_ = binary.Write(&out, binary.BigEndian, count)
	out.Write(b.body.Bytes())
	return withTrailer(out.Bytes(), b.h)
}

// withTrailer appends the checksum of data to data.
func withTrailer(data []byte, h Hash) []byte {
	sum := h.new()
	sum.Write(data)
	return sum.Sum(data)
}

// objectID computes a SHA-1 object id independently of the package code.
func objectID(typ, data string) string {
	sum := SHA1.new()
	fmt.Fprintf(sum, "%s %d\x00%s", typ, len(data), data)
	return hex.EncodeToString(sum.Sum(nil))
}

// delta assembles a delta from the sizes and a list of instructions, each
// made by cp or ins.
func delta(src, dst int, ops ...[]byte) []byte {
	d := appendVarint(nil, src)
	d = appendVarint(d, dst)
	for _, op := range ops {
		d = append(d, op...)
	}
	return d
}

func appendVarint(b []byte, v int) []byte {
	for v >= 0x80 {
		b = append(b, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// cp is a copy instruction with all offset and size bytes present.
func cp(off, n int) []byte {
	return []byte{0xff, byte(off), byte(off >> 8), byte(off >> 16), byte(off >> 24), byte(n), byte(n >> 8), byte(n >> 16)}
}

// ins is an insert instruction.
func ins(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// Fixture objects for hand-built packs.

const fxTreeData = "100644 README\x00" + "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14" +
	"40000 .fleet\x00" + "\xaa\xbb\xcc\xdd\xee\xff\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd"

// fxCommitData returns a commit on the fixture tree with the given message.
func fxCommitData(msg string) string {
	return "tree " + objectID("tree", fxTreeData) + "\n" +
		"author Alice <alice@example.invalid> 1700000000 +0000\n" +
		"committer Alice <alice@example.invalid> 1700000000 +0000\n\n" + msg
}
