package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/giteatools/fleet-controller/internal/claim"
)

func TestReadRefUpdates(t *testing.T) {
	zero, a, b := strings.Repeat("0", 40), strings.Repeat("a", 40), strings.Repeat("b", 40)
	pack := "PACK\x00\x00\x00\x02rest-of-pack"
	tests := []struct {
		name string
		in   string
		want []claim.RefUpdate
		ok   bool
	}{
		{"one update with capabilities", pkt(a+" "+b+" refs/heads/fleet/ns/tc\x00report-status side-band-64k\n") + "0000" + pack,
			[]claim.RefUpdate{{Old: a, New: b, Ref: "refs/heads/fleet/ns/tc"}}, true},
		{"creation and a second command", pkt(zero+" "+b+" refs/heads/x\x00report-status") + pkt(a+" "+b+" refs/heads/main\n") + "0000" + pack,
			[]claim.RefUpdate{{Old: zero, New: b, Ref: "refs/heads/x"}, {Old: a, New: b, Ref: "refs/heads/main"}}, true},
		{"shallow lines are skipped", pkt("shallow "+a+"\n") + pkt(a+" "+b+" refs/heads/x\n") + "0000",
			[]claim.RefUpdate{{Old: a, New: b, Ref: "refs/heads/x"}}, true},
		{"no flush", pkt(a + " " + b + " refs/heads/x\n"), nil, false},
		{"bad length", "zzzz", nil, false},
		{"short length", "0003", nil, false},
		{"not a ref", pkt(a+" "+b+" HEAD\n") + "0000", nil, false},
		{"bad object id", pkt("xyz "+b+" refs/heads/x\n") + "0000", nil, false},
		{"too few fields", pkt(a+" refs/heads/x\n") + "0000", nil, false},
		{"a ref with a no-break space is kept byte for byte", pkt(a+" "+b+" refs/heads/fleet/ns/tc\u00a0\x00report-status\n") + "0000",
			[]claim.RefUpdate{{Old: a, New: b, Ref: "refs/heads/fleet/ns/tc\u00a0"}}, true},
		{"a ref with an inner space is not split away", pkt(a+" "+b+" refs/heads/x y\n") + "0000",
			[]claim.RefUpdate{{Old: a, New: b, Ref: "refs/heads/x y"}}, true},
		{"two spaces between fields", pkt(a+"  "+b+" refs/heads/x\n") + "0000", nil, false},
		{"a tab instead of a space", pkt(a+"\t"+b+" refs/heads/x\n") + "0000", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tt.in))
			got, _, consumed, err := readRefUpdates(br)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("updates = %v, want %v", got, tt.want)
			}
			// What is forwarded is byte for byte what was sent.
			rest, _ := io.ReadAll(br)
			if !bytes.Equal(append(consumed, rest...), []byte(tt.in)) {
				t.Fatal("the forwarded body differs from the request")
			}
		})
	}
}

func TestServiceAccount(t *testing.T) {
	for user, want := range map[string]bool{"system:serviceaccount:ns:w1": true, "system:serviceaccount:ns": false,
		"system:serviceaccount::w1": false, "alice": false, "system:serviceaccount:ns:w:x": false} {
		if _, ok := serviceAccount(user); ok != want {
			t.Errorf("serviceAccount(%q) ok = %v", user, ok)
		}
	}
}

func TestAddCapability(t *testing.T) {
	adv := pkt("# service=git-receive-pack\n") + "0000" +
		pkt(strings.Repeat("a", 40)+" refs/heads/main\x00report-status side-band-64k\n") +
		pkt(strings.Repeat("b", 40)+" refs/heads/x\n") + "0000"
	out, err := addCapability([]byte(adv), "no-thin")
	if err != nil {
		t.Fatal(err)
	}
	want := pkt("# service=git-receive-pack\n") + "0000" +
		pkt(strings.Repeat("a", 40)+" refs/heads/main\x00report-status side-band-64k no-thin\n") +
		pkt(strings.Repeat("b", 40)+" refs/heads/x\n") + "0000"
	if string(out) != want {
		t.Fatalf("amended advertisement:\n%q\nwant\n%q", out, want)
	}
	if _, err := addCapability([]byte(pkt("# service=git-receive-pack\n")+"0000"+"0000"), "no-thin"); err == nil {
		t.Fatal("an advertisement without capabilities was amended")
	}
}
