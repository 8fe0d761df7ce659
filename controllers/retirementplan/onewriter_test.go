package retirementplan_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestFleetAndHostCodeStayApart keeps the two RetirementPlan reconcilers apart: no method
// of one calls a method only the other has, or names the other's type, so neither can run
// the other's steps inline. They meet only in the API server (the plans' statuses).
func TestFleetAndHostCodeStayApart(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	const fleet, host = "FleetPlanReconciler", "HostPlanReconciler"
	methods := map[string]map[string]bool{}
	var decls []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			recv := receiverName(fn.Recv.List[0].Type)
			if methods[recv] == nil {
				methods[recv] = map[string]bool{}
			}
			methods[recv][fn.Name.Name] = true
			decls = append(decls, fn)
		}
	}
	if len(methods[fleet]) == 0 || len(methods[host]) == 0 {
		t.Fatalf("found no methods of %s or %s", fleet, host)
	}
	only := func(of, other string) map[string]bool {
		out := map[string]bool{}
		for m := range methods[of] {
			if !methods[other][m] && !methods["Deps"][m] {
				out[m] = true
			}
		}
		return out
	}
	foreign := map[string]map[string]bool{fleet: only(host, fleet), host: only(fleet, host)}
	otherType := map[string]string{fleet: host, host: fleet}
	checked := 0
	for _, fn := range decls {
		recv := receiverName(fn.Recv.List[0].Type)
		if foreign[recv] == nil || fn.Body == nil {
			continue
		}
		checked++
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if foreign[recv][x.Sel.Name] {
					t.Errorf("%s: (%s).%s calls %s, a method of %s only", fset.Position(x.Pos()), recv, fn.Name.Name, x.Sel.Name, otherType[recv])
				}
			case *ast.Ident:
				if x.Name == otherType[recv] {
					t.Errorf("%s: (%s).%s names %s", fset.Position(x.Pos()), recv, fn.Name.Name, x.Name)
				}
			}
			return true
		})
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != fleet {
				return true
			}
			ast.Inspect(ts.Type, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Name == host {
					t.Errorf("%s: %s has a field of type %s", fset.Position(id.Pos()), fleet, host)
				}
				return true
			})
			return false
		})
	}
	if checked < 10 {
		t.Errorf("checked only %d methods of the two reconcilers", checked)
	}
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
