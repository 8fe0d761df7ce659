package reglist

import "testing"

func TestListMetaContinue(t *testing.T) {
	cases := []struct {
		name, raw, want string
		fails           bool
	}{
		{"metadata last, as the API server writes lists",
			`{"apiVersion":"v1","items":[{"metadata":{"name":"a"}}],"kind":"L","metadata":{"continue":"tok","resourceVersion":"9"}}` + "\n", "tok", false},
		{"the last chunk has no token",
			`{"apiVersion":"v1","items":[{"metadata":{"name":"a"}}],"kind":"L","metadata":{"resourceVersion":"9"}}`, "", false},
		{"metadata first: the whole document is read",
			`{"metadata":{"continue":"tok"},"items":[{"metadata":{"name":"a","continue":"not-this"}}]}`, "tok", false},
		{"an item's metadata last is never taken for the list's",
			`{"metadata":{"continue":"tok"},"items":[{"metadata":{"continue":"item"}}]}`, "tok", false},
		{"a string that quotes a metadata member",
			`{"items":[{"spec":{"note":"\"metadata\":{\"continue\":\"evil\"}}"}}],"metadata":{"continue":"tok"}}`, "tok", false},
		{"not JSON", `{"items":[`, "", true},
	}
	for _, c := range cases {
		meta, err := listMeta([]byte(c.raw))
		got := meta.Continue
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("%s: token %q, error %v; want %q (error %v)", c.name, got, err, c.want, c.fails)
		}
	}
}
