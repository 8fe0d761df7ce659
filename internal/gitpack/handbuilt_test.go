package gitpack

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// handBuilt describes the objects of handBuiltPack.
type handBuilt struct {
	pack           []byte
	commits, trees []string // expected ids, in pack order
	messages       []string // expected commit messages, in pack order
}

// handBuiltPack builds a pack with every kind of object and delta: whole
// commits, trees, blobs and a tag; a commit and a tree as OFS_DELTA; a commit
// as REF_DELTA on a commit that is itself a delta; blobs as OFS_DELTA and
// REF_DELTA. The expected ids are computed from the intended content, not
// from the pack.
func handBuiltPack() handBuilt {
	b := &builder{h: SHA1}
	c1 := fxCommitData("First\n\nFixes #1\n")
	c2 := fxCommitData("First\n\nCloses #2\n")
	c3 := c2 + "\nResolves #3\n"
	tree2 := fxTreeData[:len(fxTreeData)-1] + "\xde"
	blob := strings.Repeat("blob content ", 20)
	tag := "object " + objectID("commit", c1) + "\ntype commit\ntag v1\ntagger Alice <alice@example.invalid> 1700000000 +0000\n\nv1\n"
	prefix := len(c1) - len("Fixes #1\n")

	treeAt := b.whole(typeTree, fxTreeData)
	c1At := b.whole(typeCommit, c1)
	blobAt := b.whole(typeBlob, blob)
	b.whole(typeTag, tag)
	b.ofsDelta(c1At, delta(len(c1), len(c2), cp(0, prefix), ins("Closes #2\n")))
	b.refDelta(objectID("commit", c2), delta(len(c2), len(c3), cp(0, len(c2)), ins("\nResolves #3\n")))
	b.ofsDelta(treeAt, delta(len(fxTreeData), len(tree2), cp(0, len(tree2)-1), ins("\xde")))
	b.ofsDelta(blobAt, delta(len(blob), len(blob)+1, cp(0, len(blob)), ins("!")))
	b.refDelta(objectID("blob", blob), delta(len(blob), 3, ins("new")))

	return handBuilt{
		pack:     b.pack(),
		commits:  []string{objectID("commit", c1), objectID("commit", c2), objectID("commit", c3)},
		messages: []string{"First\n\nFixes #1\n", "First\n\nCloses #2\n", "First\n\nCloses #2\n\nResolves #3\n"},
		trees:    []string{objectID("tree", fxTreeData), objectID("tree", tree2)},
	}
}

func TestReadHandBuiltPack(t *testing.T) {
	hb := handBuiltPack()

	// git accepts the pack and finds the ids the test expects, which proves
	// that the builder writes git's format.
	r := newRepo(t, SHA1)
	name := strings.TrimSpace(r.git(string(hb.pack), "index-pack", "--stdin"))
	gitIDs := map[string]string{}
	for _, o := range r.verifyPack(r.dir + "/.git/objects/pack/pack-" + strings.TrimPrefix(name, "pack\t") + ".pack") {
		gitIDs[o.id] = o.typ
	}
	for _, id := range hb.commits {
		if gitIDs[id] != "commit" {
			t.Fatalf("git does not see commit %s in the pack: %v", id, gitIDs)
		}
	}
	for _, id := range hb.trees {
		if gitIDs[id] != "tree" {
			t.Fatalf("git does not see tree %s in the pack: %v", id, gitIDs)
		}
	}

	p, err := read(bytes.NewReader(hb.pack), SHA1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.out.Objects != 9 || p.ofsDeltas != 3 || p.refDeltas != 2 {
		t.Fatalf("Objects = %d, OFS_DELTA = %d, REF_DELTA = %d", p.out.Objects, p.ofsDeltas, p.refDeltas)
	}
	if len(p.out.Commits) != len(hb.commits) || len(p.out.Trees) != len(hb.trees) {
		t.Fatalf("got %d commits and %d trees: %+v", len(p.out.Commits), len(p.out.Trees), p.out)
	}
	for i, c := range p.out.Commits {
		if c.ID != hb.commits[i] || c.Message != hb.messages[i] || c.Tree != hb.trees[0] || c.Parents != nil {
			t.Errorf("commit %d = %+v, want id %s, message %q", i, c, hb.commits[i], hb.messages[i])
		}
	}
	wantEntries := []TreeEntry{
		{Mode: "100644", Name: "README", ID: "0102030405060708090a0b0c0d0e0f1011121314"},
		{Mode: "40000", Name: ".fleet", ID: "aabbccddeeff00112233445566778899aabbccdd"},
	}
	for i, tr := range p.out.Trees {
		if tr.ID != hb.trees[i] || len(tr.Entries) != 2 || tr.Entries[0] != wantEntries[0] || tr.Entries[1].Name != ".fleet" {
			t.Errorf("tree %d = %+v", i, tr)
		}
	}
	if p.out.Trees[0].Entries[1] != wantEntries[1] || p.out.Trees[1].Entries[1].ID != "aabbccddeeff00112233445566778899aabbccde" {
		t.Errorf("tree entries = %+v / %+v", p.out.Trees[0].Entries, p.out.Trees[1].Entries)
	}
}

func TestMalformedPacks(t *testing.T) {
	commit := fxCommitData("message\n")
	cases := []struct {
		name  string
		build func(b *builder) []byte
		want  string // part of the error message
	}{
		{"bad signature", func(b *builder) []byte {
			p := b.pack()
			p[3] = 'X'
			return withTrailer(p[:len(p)-20], SHA1)
		}, "signature"},
		{"version 4", func(b *builder) []byte { return b.packWith(4, 0) }, "version"},
		{"type 0", func(b *builder) []byte { b.raw(0, 3, []byte("abc")); return b.pack() }, "type 0"},
		{"type 5", func(b *builder) []byte { b.raw(5, 3, []byte("abc")); return b.pack() }, "type 5"},
		{"blob shorter than its header", func(b *builder) []byte {
			b.raw(typeBlob, 10, []byte("123456789"))
			return b.pack()
		}, "size"},
		{"blob longer than its header", func(b *builder) []byte {
			b.raw(typeBlob, 8, []byte("123456789"))
			return b.pack()
		}, "size"},
		{"commit longer than its header", func(b *builder) []byte {
			b.raw(typeCommit, len(commit)-1, []byte(commit))
			return b.pack()
		}, "size"},
		{"not zlib", func(b *builder) []byte {
			b.header(typeBlob, 3)
			b.body.WriteString("abc")
			b.count++
			return b.pack()
		}, "zlib"},
		{"zlib checksum", func(b *builder) []byte {
			b.whole(typeBlob, "abc")
			b.body.Bytes()[b.body.Len()-1] ^= 1
			return b.pack()
		}, "checksum"},
		{"size that does not fit", func(b *builder) []byte {
			b.body.Write(bytes.Repeat([]byte{0xff}, 10))
			b.body.WriteByte(0)
			b.count++
			return b.pack()
		}, "64 bits"},
		{"more objects announced than present", func(b *builder) []byte {
			b.whole(typeBlob, "abc")
			return b.packWith(2, 2)
		}, ""},
		{"fewer objects announced than present", func(b *builder) []byte {
			b.whole(typeBlob, "abc")
			b.whole(typeBlob, "def")
			return b.packWith(3, 1)
		}, "checksum"},
		{"delta copy past the base", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 5, cp(len(commit)-2, 5)))
			return b.pack()
		}, "copies"},
		{"delta instruction 0", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 5, []byte{0}, ins("abcde")))
			return b.pack()
		}, "instruction 0"},
		{"delta for a base of another size", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit)+1, 5, ins("abcde")))
			return b.pack()
		}, "base of"},
		{"delta result longer than declared", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 4, ins("abcde")))
			return b.pack()
		}, "exceeds"},
		{"delta result shorter than declared", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 6, ins("abcde")))
			return b.pack()
		}, "declared"},
		{"delta insert cut short", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 10, []byte{10, 'a', 'b'}))
			return b.pack()
		}, "truncated"},
		{"delta copy instruction cut short", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, delta(len(commit), 10, []byte{0x91, 0}))
			return b.pack()
		}, "truncated"},
		{"delta size that does not fit", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at, append(bytes.Repeat([]byte{0xff}, 10), 0))
			return b.pack()
		}, "63 bits"},
		{"delta on the middle of an object", func(b *builder) []byte {
			at := b.whole(typeCommit, commit)
			b.ofsDelta(at+1, delta(len(commit), 1, ins("a")))
			return b.pack()
		}, "no object"},
		{"delta on a base before the pack", func(b *builder) []byte {
			b.ofsDelta(-100, delta(1, 1, ins("a")))
			return b.pack()
		}, "out of range"},
		{"delta on itself", func(b *builder) []byte {
			b.header(typeOfsDelta, 3)
			b.body.WriteByte(0)
			b.deflate(delta(1, 1, ins("a")))
			b.count++
			return b.pack()
		}, "out of range"},
		{"commit without a tree", func(b *builder) []byte {
			b.whole(typeCommit, "author Alice <a@b> 1 +0000\n\nmsg\n")
			return b.pack()
		}, "tree header"},
		{"commit with a short tree id", func(b *builder) []byte {
			b.whole(typeCommit, "tree abc\n\nmsg\n")
			return b.pack()
		}, "tree header"},
		{"commit with a bad parent", func(b *builder) []byte {
			b.whole(typeCommit, "tree "+strings.Repeat("a", 40)+"\nparent "+strings.Repeat("g", 40)+"\n\nmsg\n")
			return b.pack()
		}, "parent"},
		{"tree entry with a slash", func(b *builder) []byte {
			b.whole(typeTree, "100644 .fleet/x\x00"+strings.Repeat("\x01", 20))
			return b.pack()
		}, "bad name"},
		{"tree entry with an empty name", func(b *builder) []byte {
			b.whole(typeTree, "100644 \x00"+strings.Repeat("\x01", 20))
			return b.pack()
		}, "bad name"},
		{"tree entry with a bad mode", func(b *builder) []byte {
			b.whole(typeTree, "10064x a\x00"+strings.Repeat("\x01", 20))
			return b.pack()
		}, "bad mode"},
		{"tree entry cut short", func(b *builder) []byte {
			b.whole(typeTree, "100644 a\x00"+strings.Repeat("\x01", 19))
			return b.pack()
		}, "cut short"},
		{"tree entry delta-built with a slash", func(b *builder) []byte {
			at := b.whole(typeTree, fxTreeData)
			b.ofsDelta(at, delta(len(fxTreeData), 31, ins("100644 a/b\x00"), cp(14, 20)))
			return b.pack()
		}, "bad name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pack := tc.build(&builder{h: SHA1})
			_, err := Read(bytes.NewReader(pack), SHA1, Limits{})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
}

func TestMissingDeltaBases(t *testing.T) {
	blob := strings.Repeat("x", 100)
	cases := []struct {
		name  string
		build func(b *builder)
	}{
		{"base not in the pack", func(b *builder) {
			b.refDelta(strings.Repeat("ab", 20), delta(1, 1, ins("a")))
		}},
		// Git writes bases before their deltas; Read does not look ahead.
		{"base later in the pack", func(b *builder) {
			b.refDelta(objectID("blob", blob), delta(len(blob), 1, ins("a")))
			b.whole(typeBlob, blob)
		}},
		// A blob rebuilt from a delta is not kept, so its id is unknown.
		{"base is a blob built from a delta", func(b *builder) {
			at := b.whole(typeBlob, blob)
			b.ofsDelta(at, delta(len(blob), 3, ins("new")))
			b.refDelta(objectID("blob", "new"), delta(3, 3, cp(0, 3)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{h: SHA1}
			tc.build(b)
			if _, err := Read(bytes.NewReader(b.pack()), SHA1, Limits{}); !errors.Is(err, ErrThinPack) {
				t.Fatalf("err = %v, want ErrThinPack", err)
			}
		})
	}
}

func TestDuplicateObjectsAreListedOnce(t *testing.T) {
	b := &builder{h: SHA1}
	b.whole(typeCommit, fxCommitData("again\n"))
	b.whole(typeCommit, fxCommitData("again\n"))
	got, err := Read(bytes.NewReader(b.pack()), SHA1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Objects != 2 || len(got.Commits) != 1 {
		t.Fatalf("Objects = %d, commits = %d", got.Objects, len(got.Commits))
	}
}

func TestLimits(t *testing.T) {
	commit := fxCommitData("message\n")
	bigger := commit + strings.Repeat("more\n", 10)
	blob := strings.Repeat("b", 1000)
	b := &builder{h: SHA1}
	b.whole(typeTree, fxTreeData)
	at := b.whole(typeCommit, commit)
	b.ofsDelta(at, delta(len(commit), len(bigger), cp(0, len(commit)), ins(strings.Repeat("more\n", 10))))
	b.whole(typeBlob, blob) // large, but not kept
	pack := b.pack()
	kept := int64(len(fxTreeData) + len(commit) + len(bigger))

	cases := []struct {
		name string
		lim  Limits
		fail string // part of the expected error message; empty if Read succeeds
	}{
		{"defaults", Limits{}, ""},
		{"negative means default", Limits{MaxObjects: -1, MaxInflated: -1, MaxObjectSize: -1}, ""},
		{"exact object count", Limits{MaxObjects: 4}, ""},
		{"too many objects", Limits{MaxObjects: 3}, "4 objects"},
		{"blob at the object size limit", Limits{MaxObjectSize: int64(len(blob))}, ""},
		{"blob over the object size limit", Limits{MaxObjectSize: int64(len(blob)) - 1}, "blob of 1000 bytes"},
		{"delta result over the object size limit", Limits{MaxObjectSize: int64(len(bigger)) - 1}, "delta result"},
		{"exactly the kept bytes", Limits{MaxInflated: kept}, ""},
		{"one kept byte too many", Limits{MaxInflated: kept - 1}, "commits and trees"},
		{"the delta result is what overflows", Limits{MaxInflated: kept - int64(len(bigger))}, "object 2 of 4,"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(bytes.NewReader(pack), SHA1, tc.lim)
			switch {
			case tc.fail == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.fail == "" && (len(got.Commits) != 2 || got.Commits[1].Message != "message\n"+strings.Repeat("more\n", 10)):
				t.Fatalf("got %+v", got)
			case tc.fail != "" && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.fail)):
				t.Fatalf("err = %v, want ErrTooLarge mentioning %q", err, tc.fail)
			}
		})
	}

	// A header may claim any size; the claim is refused before anything is
	// allocated for it.
	huge := &builder{h: SHA1}
	huge.raw(typeCommit, 1<<40, []byte(commit))
	if _, err := Read(bytes.NewReader(huge.pack()), SHA1, Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("commit claiming 1 TiB: err = %v", err)
	}
}

func TestParseCommit(t *testing.T) {
	tree := strings.Repeat("a", 40)
	p1, p2 := strings.Repeat("b", 40), strings.Repeat("c", 40)
	cases := []struct {
		name, data string
		want       Commit
	}{
		{"no blank line", "tree " + tree + "\nauthor A <a@b> 1 +0000\n", Commit{Tree: tree}},
		{"two parents and a message", "tree " + tree + "\nparent " + p1 + "\nparent " + p2 + "\nauthor A <a@b> 1 +0000\n\nsubject\n\nbody\n",
			Commit{Tree: tree, Parents: []string{p1, p2}, Message: "subject\n\nbody\n"}},
		// Git only takes the parent lines that follow the tree.
		{"parent after another header", "tree " + tree + "\nauthor A <a@b> 1 +0000\nparent " + p1 + "\n\nm",
			Commit{Tree: tree, Message: "m"}},
		{"upper-case ids", "tree " + strings.ToUpper(tree) + "\nparent " + strings.ToUpper(p1) + "\n\nm",
			Commit{Tree: tree, Parents: []string{p1}, Message: "m"}},
		{"mergetag with embedded headers", "tree " + tree + "\nparent " + p1 + "\nmergetag object " + p2 +
			"\n type commit\n tree " + p2 + "\n \n tag message\ncommitter A <a@b> 1 +0000\n\nFixes #1\n",
			Commit{Tree: tree, Parents: []string{p1}, Message: "Fixes #1\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCommit(tc.data, SHA1)
			if err != nil {
				t.Fatal(err)
			}
			if got.Tree != tc.want.Tree || got.Message != tc.want.Message || strings.Join(got.Parents, ",") != strings.Join(tc.want.Parents, ",") {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
