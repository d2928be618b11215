package engine_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogsUnderASpanTakeTheContext: slog records carry the trace and span
// ids of the span in the context they are logged with
// (telemetry.LogHandler). A function of the engine that has a ctx logs
// with it (InfoContext, WarnContext, …): a record logged without it, while
// a run's span is active, would not join the run's trace.
func TestLogsUnderASpanTakeTheContext(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := gotoken.NewFileSet()
	var bare []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var typ *ast.FuncType
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				typ, body = fn.Type, fn.Body
			case *ast.FuncLit:
				typ, body = fn.Type, fn.Body
			default:
				return true
			}
			if body == nil || !hasCtxParam(typ) {
				return true
			}
			ast.Inspect(body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok {
					return false // its own ctx, or none: checked on its own
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "Debug", "Info", "Warn", "Error":
				default:
					return true
				}
				if recv, ok := sel.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "log" || isIdent(sel.X, "log") {
					bare = append(bare, fset.Position(call.Pos()).String())
				}
				return true
			})
			return true
		})
	}
	for _, p := range bare {
		t.Errorf("%s: logs without the ctx in scope (use the …Context form)", p)
	}
}

func hasCtxParam(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		for _, n := range p.Names {
			if n.Name == "ctx" {
				return true
			}
		}
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
