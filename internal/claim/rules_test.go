package claim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestRuleSetDigestIsOverExactBytes(t *testing.T) {
	b, rs := RuleSet()
	file, err := os.ReadFile("rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, file) {
		t.Fatal("RuleSet bytes differ from rules.json")
	}
	sum := sha256.Sum256(file)
	if want := "sha256:" + hex.EncodeToString(sum[:]); RuleSetDigest() != want {
		t.Fatalf("digest %s, want %s", RuleSetDigest(), want)
	}
	if rs.Version == "" || rs.Schema == "" {
		t.Fatalf("rule set lacks version or schema: %+v", rs)
	}
	// The returned bytes are a copy.
	b[0] = 'X'
	if again, _ := RuleSet(); again[0] == 'X' {
		t.Fatal("RuleSet returned shared storage")
	}
	if RuleSetPath != ".fleet/claim-rules.json" {
		t.Fatalf("RuleSetPath = %q", RuleSetPath)
	}
	if _, err := ParseRules(file); err != nil {
		t.Fatalf("ParseRules(rules.json): %v", err)
	}
}

// codeRuleIDs parses the package's non-test sources and returns every
// constant of type ruleID (name → value) and how often each name is used
// outside its declaration. It also reports any rule-id-shaped string literal
// outside those declarations, which would bypass the table.
func codeRuleIDs(t *testing.T) (consts map[string]string, uses map[string]int, stray []string) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	consts, uses = map[string]string{}, map[string]int{}
	idShape := regexp.MustCompile(`^"TC\d+"$`)
	declared := map[*ast.Ident]bool{}
	declLits := map[*ast.BasicLit]bool{}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok || typ.Name != "ruleID" {
					continue
				}
				for i, n := range vs.Names {
					lit := vs.Values[i].(*ast.BasicLit)
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					consts[n.Name] = v
					declared[n] = true
					declLits[lit] = true
				}
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				if _, ok := consts[x.Name]; ok && !declared[x] {
					uses[x.Name]++
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING && idShape.MatchString(x.Value) && !declLits[x] {
					stray = append(stray, fset.Position(x.Pos()).String())
				}
			}
			return true
		})
	}
	return consts, uses, stray
}

// TestRuleIDsMatchCode: every rule id referenced from code exists in
// rules.json, every rule in rules.json is referenced from code, and no code
// path builds a refusal from a literal id.
func TestRuleIDsMatchCode(t *testing.T) {
	consts, uses, stray := codeRuleIDs(t)
	if len(consts) == 0 {
		t.Fatal("found no ruleID constants")
	}
	_, rs := RuleSet()
	inFile := map[string]bool{}
	for _, r := range rs.Rules {
		inFile[r.ID] = true
	}
	inCode := map[string]string{}
	for name, id := range consts {
		if other, dup := inCode[id]; dup {
			t.Errorf("rule id %s declared twice (%s, %s)", id, name, other)
		}
		inCode[id] = name
		if !inFile[id] {
			t.Errorf("code constant %s = %s is not in rules.json", name, id)
		}
		if uses[name] == 0 {
			t.Errorf("code constant %s = %s is never used", name, id)
		}
	}
	for id := range inFile {
		if _, ok := inCode[id]; !ok {
			t.Errorf("rules.json rule %s has no code constant", id)
		}
	}
	for _, pos := range stray {
		t.Errorf("rule id literal outside the ruleID constants at %s", pos)
	}
}

func TestRuleSetCoversEveryClassAndBlocker(t *testing.T) {
	_, rs := RuleSet()
	classes := map[Class]bool{}
	blockers := map[Blocker]bool{}
	for _, r := range rs.Rules {
		classes[r.Class] = true
		blockers[r.Blocker] = true
	}
	for _, c := range Classes() {
		if !classes[c] {
			t.Errorf("no rule of class %s", c)
		}
	}
	for _, b := range Blockers() {
		if !blockers[b] {
			t.Errorf("no rule with blocker %s", b)
		}
	}
	if len(rs.Classes) != len(Classes()) || len(rs.Blockers) != len(Blockers()) {
		t.Errorf("file lists %v / %v, code %v / %v", rs.Classes, rs.Blockers, Classes(), Blockers())
	}
}

// TestRuleMessagesAreFixedAndNeutral: messages carry no reference that could
// point at an item: no '#', no digits, no repository-like '/'.
func TestRuleMessagesAreFixedAndNeutral(t *testing.T) {
	_, rs := RuleSet()
	for _, r := range rs.Rules {
		if strings.ContainsAny(r.Message, "#/0123456789%{}") {
			t.Errorf("rule %s message %q contains a reference or placeholder", r.ID, r.Message)
		}
		if r.Class == ClassContention && !strings.Contains(r.Message, "Contention is normal") {
			t.Errorf("contention rule %s does not say contention is normal", r.ID)
		}
	}
}

func TestParseRulesRejectsBrokenFiles(t *testing.T) {
	good := `{"schema":"s","version":"1","description":"d","classes":[],"blockers":[],"rules":[` +
		`{"id":"A","predicate":"p","stage":"validate","class":"policy","blocker":"","message":"m","description":"d"}]}`
	if _, err := ParseRules([]byte(good)); err != nil {
		t.Fatalf("good file refused: %v", err)
	}
	bad := map[string]string{
		"not json":          `{`,
		"unknown field":     strings.Replace(good, `"schema"`, `"surprise":1,"schema"`, 1),
		"no version":        strings.Replace(good, `"version":"1"`, `"version":""`, 1),
		"no rules":          `{"schema":"s","version":"1","rules":[]}`,
		"unknown class":     strings.Replace(good, `"class":"policy"`, `"class":"mood"`, 1),
		"unknown blocker":   strings.Replace(good, `"blocker":""`, `"blocker":"busy"`, 1),
		"empty message":     strings.Replace(good, `"message":"m"`, `"message":""`, 1),
		"duplicate id":      strings.Replace(good, `]}`, `,{"id":"A","predicate":"q","class":"policy","message":"m"}]}`, 1),
		"duplicate pred":    strings.Replace(good, `]}`, `,{"id":"B","predicate":"p","class":"policy","message":"m"}]}`, 1),
		"missing id":        strings.Replace(good, `"id":"A"`, `"id":""`, 1),
		"missing predicate": strings.Replace(good, `"predicate":"p"`, `"predicate":""`, 1),
	}
	for name, doc := range bad {
		if _, err := ParseRules([]byte(doc)); !errors.Is(err, ErrRuleSetInvalid) {
			t.Errorf("%s: err = %v, want ErrRuleSetInvalid", name, err)
		}
	}
}

func TestRuleForMissingIDFailsClosed(t *testing.T) {
	r := refusal("TC999", OutcomeRejected, fxIssue())
	if !r.Refused() || r.Class != ClassPolicy || r.RetryPermitted {
		t.Fatalf("missing rule did not fail closed: %+v", r)
	}
}
