package gitpack

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRead checks that no input makes Read panic or fail in an unexpected
// way: reading from memory, every error must be one of the sentinels, and a
// successful result can hold no more commits and trees than the pack has
// objects.
func FuzzRead(f *testing.F) {
	f.Add(smallPack(f))
	f.Add(handBuiltPack().pack)
	f.Add((&builder{h: SHA1}).pack())
	sha256Pack := &builder{h: SHA256}
	sha256Pack.whole(typeBlob, "x")
	f.Add(sha256Pack.pack())

	// Small limits keep the fuzzer from spending its time on huge sizes.
	lim := Limits{MaxObjects: 256, MaxInflated: 256 << 10, MaxObjectSize: 256 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, h := range []Hash{SHA1, SHA256} {
			got, err := Read(bytes.NewReader(data), h, lim)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrThinPack) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("unexpected kind of error: %v", err)
				}
				continue
			}
			if len(got.Commits)+len(got.Trees) > got.Objects {
				t.Fatalf("%d commits and %d trees in %d objects", len(got.Commits), len(got.Trees), got.Objects)
			}
			for _, c := range got.Commits {
				if len(c.ID) != 2*h.size() || len(c.Tree) != 2*h.size() {
					t.Fatalf("commit with ids of the wrong size: %+v", c)
				}
			}
		}
	})
}
