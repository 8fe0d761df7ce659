package gitpack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// paragraph makes commit messages long and alike, so that git stores commits
// as deltas of each other.
const paragraph = "The reconciler no longer mistakes a late heartbeat for a dead worker: the fence is " +
	"kept, the retirement approval binding is checked again before any state moves, and the " +
	"claim lease is only released once the read-back proves that Gitea recorded the change.\n"

// history builds a repository with varied commits: long similar messages, an
// empty message, a message with several blank lines, a merge carrying a
// gpgsig header, files in nested directories (.fleet among them), and a
// tree that only changes slightly from commit to commit. It returns the
// repository and, for every commit, the message it was given.
func history(t *testing.T, format Hash) (*repo, map[string]string) {
	t.Helper()
	r := newRepo(t, format)
	msgs := map[string]string{}
	add := func(msg string, files map[string]string) {
		msgs[r.commit(msg, files)] = msg
	}
	for i := 1; i <= 6; i++ {
		var cfg strings.Builder
		for j := 1; j <= 40; j++ {
			fmt.Fprintf(&cfg, "key%d: value %d\n", j, j*i)
		}
		add(fmt.Sprintf("Rework worker fencing, step %d\n\n%s%s%s\nFixes #%d\n", i, paragraph, paragraph, paragraph, 10+i),
			map[string]string{".fleet/config.yaml": cfg.String(), fmt.Sprintf("src/pkg/file%d.go", i): "package pkg\n"})
	}
	add("", map[string]string{"README.md": "empty message\n"})
	add("Subject\n\n\nbody after two blank lines\n\n  indented\n", map[string]string{"docs/a b.txt": "name with a space\n"})

	// A merge written by hand, so that it can carry a signature header whose
	// continuation lines include one that is a single space.
	side := strings.TrimSpace(r.git("", "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "side branch"))
	msgs[side] = "side branch\n"
	mergeMsg := "Merge the side branch\n\nCloses #7\n"
	raw := "tree " + strings.TrimSpace(r.git("", "rev-parse", "HEAD^{tree}")) + "\n" +
		"parent " + r.head() + "\n" +
		"parent " + side + "\n" +
		"author Alice <alice@example.invalid> 1700000000 +0000\n" +
		"committer Alice <alice@example.invalid> 1700000000 +0000\n" +
		"gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEEnotreallyasignature\n =abcd\n -----END PGP SIGNATURE-----\n" +
		"\n" + mergeMsg
	merge := strings.TrimSpace(r.git(raw, "hash-object", "-t", "commit", "-w", "--stdin"))
	msgs[merge] = mergeMsg
	r.git("", "update-ref", "refs/heads/main", merge)
	add("After the merge\n", map[string]string{".fleet/config.yaml": "replaced: true\n"})
	return r, msgs
}

// readFile reads a pack file with Read, through a non-byte reader so that
// Read's own buffering is used, and returns the parser.
func readFile(t *testing.T, path string, h Hash) *parser {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := read(f, h, Limits{})
	if err != nil {
		t.Fatalf("Read(%s): %v", path, err)
	}
	return p
}

// checkMessages checks every commit message against the one it was created
// with.
func checkMessages(t *testing.T, got *Contents, msgs map[string]string) {
	t.Helper()
	for _, c := range got.Commits {
		want, ok := msgs[c.ID]
		if !ok {
			t.Errorf("commit %s was not created by the test", c.ID)
		} else if c.Message != want {
			t.Errorf("commit %s message = %q, want %q", c.ID, c.Message, want)
		}
	}
	if len(got.Commits) != len(msgs) {
		t.Errorf("got %d commits, created %d", len(got.Commits), len(msgs))
	}
}

func TestReadPackWithOffsetDeltas(t *testing.T) {
	r, msgs := history(t, SHA1)
	pack := r.packToFile("main\n", "--revs", "--delta-base-offset", "--window=250", "--depth=50")
	var commitDeltas, treeDeltas int
	for _, o := range r.verifyPack(pack) {
		if o.delta && o.typ == "commit" {
			commitDeltas++
		}
		if o.delta && o.typ == "tree" {
			treeDeltas++
		}
	}
	if commitDeltas == 0 || treeDeltas == 0 {
		t.Fatalf("git stored %d commits and %d trees as deltas; the test needs both", commitDeltas, treeDeltas)
	}

	p := readFile(t, pack, SHA1)
	if p.ofsDeltas == 0 || p.refDeltas != 0 {
		t.Fatalf("read %d OFS_DELTA and %d REF_DELTA objects, want only OFS_DELTA", p.ofsDeltas, p.refDeltas)
	}
	checkAgainstGit(t, r, pack, &p.out)
	checkMessages(t, &p.out, msgs)

	// The root tree of the last commit lists .fleet, which the gateway looks for.
	last := p.out.Commits[0] // pack-objects writes the newest commit first
	if last.Message != "After the merge\n" {
		t.Fatalf("first commit in the pack is %q", last.Message)
	}
	var fleet *TreeEntry
	for _, tr := range p.out.Trees {
		if tr.ID == last.Tree {
			for i := range tr.Entries {
				if tr.Entries[i].Name == ".fleet" {
					fleet = &tr.Entries[i]
				}
			}
		}
	}
	if fleet == nil || fleet.Mode != "40000" {
		t.Fatalf(".fleet entry of the root tree = %+v", fleet)
	}
}

// Without --delta-base-offset git writes every delta as a REF_DELTA; packing
// only the commits and trees makes the bases of every delta commits and
// trees, including chains of deltas.
func TestReadPackWithRefDeltas(t *testing.T) {
	r, msgs := history(t, SHA1)
	var ids strings.Builder
	list := r.git(r.git("", "rev-list", "--objects", "main"), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	for _, line := range strings.Split(list, "\n") {
		if id, typ, _ := strings.Cut(line, " "); typ == "commit" || typ == "tree" {
			ids.WriteString(id + "\n")
		}
	}
	pack := r.packToFile(ids.String(), "--window=250", "--depth=50")
	deep := false
	for _, o := range r.verifyPack(pack) {
		deep = deep || o.delta
	}
	if !deep {
		t.Fatal("git stored no delta")
	}

	p := readFile(t, pack, SHA1)
	if p.refDeltas == 0 || p.ofsDeltas != 0 {
		t.Fatalf("read %d REF_DELTA and %d OFS_DELTA objects, want only REF_DELTA", p.refDeltas, p.ofsDeltas)
	}
	checkAgainstGit(t, r, pack, &p.out)
	checkMessages(t, &p.out, msgs)
}

func TestReadSHA256Pack(t *testing.T) {
	r, msgs := history(t, SHA256)
	pack := r.packToFile("main\n", "--revs", "--delta-base-offset", "--window=250", "--depth=50")
	p := readFile(t, pack, SHA256)
	if p.ofsDeltas == 0 {
		t.Fatal("the SHA-256 pack has no delta")
	}
	checkAgainstGit(t, r, pack, &p.out)
	checkMessages(t, &p.out, msgs)
	if len(p.out.Commits[0].ID) != 64 || len(p.out.Commits[0].Tree) != 64 {
		t.Fatalf("ids are not SHA-256: %+v", p.out.Commits[0])
	}

	// Read as SHA-1, the same bytes fail: ids and checksum have other sizes.
	data, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bytes.NewReader(data), SHA1, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("SHA-256 pack read as SHA-1: err = %v, want ErrMalformed", err)
	}
}

// A push normally sends a thin pack: objects changed slightly from ones the
// server has are sent as REF_DELTA against those objects, which are not in
// the pack.
func TestReadThinPack(t *testing.T) {
	r := newRepo(t, SHA1)
	var big strings.Builder
	for i := range 200 {
		fmt.Fprintf(&big, "line %d of a file large enough for git to store its next version as a delta\n", i)
	}
	base := r.commit("base\n", map[string]string{"big.txt": big.String()})
	changed := strings.Replace(big.String(), "line 100 of", "line one hundred of", 1)
	next := r.commit("next\n", map[string]string{"big.txt": changed})

	thin := r.git(next+"\n^"+base+"\n", "pack-objects", "-q", "--thin", "--stdout", "--revs", "--delta-base-offset")

	// git itself cannot use the pack without the base's objects...
	empty := newRepo(t, SHA1)
	if _, stderr, err := empty.try(thin, "-C", empty.dir, "index-pack", "--stdin"); err == nil || !strings.Contains(stderr, "unresolved delta") {
		t.Fatalf("git index-pack in an empty repository: err = %v, stderr = %q; want unresolved deltas", err, stderr)
	}
	// ...but completes it where they are, so the pack is otherwise sound.
	r.git(thin, "index-pack", "--stdin", "--fix-thin")

	_, err := Read(strings.NewReader(thin), SHA1, Limits{})
	if !errors.Is(err, ErrThinPack) || errors.Is(err, ErrMalformed) {
		t.Fatalf("Read(thin pack) err = %v, want ErrThinPack only", err)
	}
}

// smallPack returns a real pack with commits, trees, blobs and deltas.
func smallPack(tb testing.TB) []byte {
	tb.Helper()
	r := newRepo(tb, SHA1)
	for i := range 3 {
		r.commit(fmt.Sprintf("Change %d\n\n%sFixes #%d\n", i, paragraph, i),
			map[string]string{".fleet/a.yaml": fmt.Sprintf("n: %d\n", i), "b/c.txt": paragraph})
	}
	return []byte(r.git("main\n", "pack-objects", "-q", "--stdout", "--revs", "--delta-base-offset", "--window=50"))
}

func TestEveryCorruptionIsDetected(t *testing.T) {
	pack := smallPack(t)
	if _, err := Read(bytes.NewReader(pack), SHA1, Limits{}); err != nil {
		t.Fatalf("intact pack: %v", err)
	}
	for i := range pack {
		bad := bytes.Clone(pack)
		bad[i] ^= 0x04
		_, err := Read(bytes.NewReader(bad), SHA1, Limits{})
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrThinPack) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("flipping a bit of byte %d of %d: err = %v", i, len(pack), err)
		}
	}
	// The checksum alone.
	bad := bytes.Clone(pack)
	bad[len(bad)-1] ^= 1
	if _, err := Read(bytes.NewReader(bad), SHA1, Limits{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("bad trailing checksum: err = %v", err)
	}
}

func TestEveryTruncationIsDetected(t *testing.T) {
	pack := smallPack(t)
	for n := range len(pack) {
		_, err := Read(bytes.NewReader(pack[:n]), SHA1, Limits{})
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("pack cut to %d of %d bytes: err = %v, want ErrMalformed", n, len(pack), err)
		}
	}
}

func TestReadConsumesExactlyThePack(t *testing.T) {
	pack := smallPack(t)
	after := "0000more data that belongs to someone else"
	in := bytes.NewReader(append(bytes.Clone(pack), after...))
	if _, err := Read(in, SHA1, Limits{}); err != nil {
		t.Fatal(err)
	}
	if in.Len() != len(after) {
		t.Fatalf("%d bytes left after the pack, want %d", in.Len(), len(after))
	}
}

// Read works on a stream that offers no io.ByteReader, as git writes it.
func TestReadFromGitStdout(t *testing.T) {
	r, msgs := history(t, SHA1)
	cmd := exec.Command("git", "-C", r.dir, "pack-objects", "-q", "--stdout", "--revs", "--delta-base-offset")
	cmd.Env = r.env
	cmd.Stdin = strings.NewReader("main\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(out, SHA1, Limits{})
	_, _ = io.Copy(io.Discard, out)
	if werr := cmd.Wait(); werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkMessages(t, got, msgs)
}

// failingReader returns its data and then an error of its own.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

var errBroken = errors.New("connection reset")

func TestReaderErrorsAreNotMalformed(t *testing.T) {
	pack := smallPack(t)
	for _, n := range []int{0, 5, 12, 13, 40, len(pack) / 2, len(pack) - 3} {
		_, err := Read(&failingReader{data: pack[:n], err: errBroken}, SHA1, Limits{})
		if !errors.Is(err, errBroken) || errors.Is(err, ErrMalformed) {
			t.Errorf("reader failing after %d bytes: err = %v, want only the reader's error", n, err)
		}
	}
}

func TestUnknownObjectFormat(t *testing.T) {
	if _, err := Read(bytes.NewReader(smallPack(t)), Hash(7), Limits{}); err == nil || errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
}
