package main

import (
	"go/ast"
	"go/build/constraint"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Finding is one missing or malformed doc comment: where it is and what is wrong, in the form
// "file:line:col: message" when printed.
type Finding struct {
	Pos token.Position // the identifier's position (for a package, its first file's package clause)
	Msg string         // what is wrong, naming the identifier: "func Open has no doc comment"
}

// String formats f as go vet does: "file:line:col: message".
func (f Finding) String() string { return f.Pos.String() + ": " + f.Msg }

// Options selects the optional rules. The zero value checks only what golint checked.
type Options struct {
	// Members requires a comment (a doc comment above, or a line comment after) on every exported field of an
	// exported struct type and every method of an exported interface type. Their wording is not checked:
	// field comments describe a value ("// in bytes") and need not repeat the field's name.
	Members bool
	// DocGo requires a package's comment to live in its doc.go (the package has one).
	DocGo bool
}

// ignored reports whether f is left out of the check: a generated file ("// Code generated ... DO NOT EDIT.")
// or one built only with the tag ignore (//go:build ignore, the convention for generator programs).
func ignored(f *ast.File) bool {
	if ast.IsGenerated(f) {
		return true
	}
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			if x, err := constraint.Parse(c.Text); err == nil {
				if tag, ok := x.(*constraint.TagExpr); ok && tag.Tag == "ignore" {
					return true
				}
			}
		}
	}
	return false
}

// checkPackage checks the files of one package (one directory, one package name; test files already left
// out). Files of every build tag are checked together, so a declaration that exists once per tag (cuda's
// stub.go beside its cgo files) must be documented in each. The findings are sorted by position.
func checkPackage(fset *token.FileSet, files []*ast.File, opt Options) []Finding {
	var out []Finding
	add := func(pos token.Pos, msg string) {
		out = append(out, Finding{Pos: fset.Position(pos), Msg: msg})
	}
	var kept []*ast.File
	for _, f := range files {
		if !ignored(f) {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	sort.Slice(kept, func(i, j int) bool {
		return fset.Position(kept[i].Package).Filename < fset.Position(kept[j].Package).Filename
	})
	checkPackageComment(fset, kept, opt, add)
	for _, f := range kept {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				checkFunc(d, add)
			case *ast.GenDecl:
				checkGen(fset, d, opt, add)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}

// checkPackageComment requires exactly one file to carry the package comment, starting "Package name " for a
// library (a command's may start with anything: "Command tune ..." or "Tune fine-tunes ..."), and with
// opt.DocGo that file to be doc.go.
func checkPackageComment(fset *token.FileSet, files []*ast.File, opt Options, add func(token.Pos, string)) {
	name := files[0].Name.Name
	var with []*ast.File
	for _, f := range files {
		if docText(f.Doc) != "" {
			with = append(with, f)
		}
	}
	if len(with) == 0 {
		add(files[0].Package, "package "+name+" has no package comment")
		return
	}
	for _, f := range with[1:] {
		add(f.Package, "package "+name+" has its comment in more than one file (also in "+
			filepath.Base(fset.Position(with[0].Package).Filename)+"); keep one")
	}
	f := with[0]
	if name != "main" && !startsWith(docText(f.Doc), "Package "+name) {
		add(f.Package, `package comment should start "Package `+name+` ..."`)
	}
	if opt.DocGo && filepath.Base(fset.Position(f.Package).Filename) != "doc.go" {
		add(f.Package, "package "+name+"'s comment should be in doc.go")
	}
}

// checkFunc checks an exported function, or an exported method whose receiver's type is exported.
func checkFunc(d *ast.FuncDecl, add func(token.Pos, string)) {
	if !d.Name.IsExported() {
		return
	}
	kind := "func"
	if d.Recv != nil {
		recv := receiverType(d.Recv)
		if !ast.IsExported(recv) {
			return
		}
		kind = "method " + recv + "."
	}
	checkDoc(d.Doc, d.Name, kind, add)
}

// receiverType is the name of a method's receiver type: T for (T), (*T), (T[E]) and (*T[K, V]).
func receiverType(recv *ast.FieldList) string {
	if len(recv.List) == 0 {
		return ""
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// checkGen checks the types, constants and variables of one declaration.
//
// A type needs its own doc comment; in a parenthesized group of one type the group's comment is its own.
// A constant or variable is documented by its own comment, the group's comment or, inside a group, a line
// comment after it; only a comment of its own outside a group must start with its name (as golint: a
// group's comment describes the group).
func checkGen(fset *token.FileSet, d *ast.GenDecl, opt Options, add func(token.Pos, string)) {
	switch d.Tok {
	case token.TYPE:
		for _, s := range d.Specs {
			ts := s.(*ast.TypeSpec)
			if !ts.Name.IsExported() {
				continue
			}
			doc := ts.Doc
			if doc == nil && len(d.Specs) == 1 {
				doc = d.Doc
			}
			checkDoc(doc, ts.Name, "type", add)
			if opt.Members {
				checkMembers(fset, ts, add)
			}
		}
	case token.CONST, token.VAR:
		kind := d.Tok.String()
		grouped := d.Lparen.IsValid()
		for _, s := range d.Specs {
			vs := s.(*ast.ValueSpec)
			exported := exportedNames(vs.Names)
			if len(exported) == 0 {
				continue
			}
			if grouped {
				if docText(vs.Doc) == "" && docText(d.Doc) == "" && docText(vs.Comment) == "" {
					add(exported[0].Pos(), kind+" "+exported[0].Name+" has no comment (nor its group)")
				}
				continue
			}
			doc := vs.Doc
			if doc == nil {
				doc = d.Doc
			}
			checkDoc(doc, exported[0], kind, add)
		}
	}
}

// checkMembers requires a comment on each exported field of an exported struct and each method of an
// exported interface. Embedded fields and interfaces are documented by their own type and are skipped.
//
// A member is documented by a comment above it, by a comment at the end of its line, or by the doc comment of
// the run of members it belongs to when that comment names it: in
//
//	// Train, Eval and Test are data files.
//	Train string
//	Eval  string
//	Test  string
//
// Eval and Test are documented. A run is a sequence of members on consecutive lines; a blank line or another
// doc comment ends it.
func checkMembers(fset *token.FileSet, ts *ast.TypeSpec, add func(token.Pos, string)) {
	var fields *ast.FieldList
	var what string
	switch t := ts.Type.(type) {
	case *ast.StructType:
		fields, what = t.Fields, "field"
	case *ast.InterfaceType:
		fields, what = t.Methods, "method"
	default:
		return
	}
	runDoc, prevEnd := "", -1 // the doc comment of the current run, and the last line of its latest member
	for _, f := range fields.List {
		start := fset.Position(f.Pos()).Line
		if f.Doc != nil {
			runDoc = docText(f.Doc)
		} else if start != prevEnd+1 {
			runDoc = ""
		}
		prevEnd = fset.Position(f.End()).Line
		if f.Comment != nil {
			prevEnd = max(prevEnd, fset.Position(f.Comment.End()).Line)
		}
		names := exportedNames(f.Names)
		if len(names) == 0 || docText(f.Doc) != "" || docText(f.Comment) != "" {
			continue
		}
		if _, isFunc := f.Type.(*ast.FuncType); what == "method" && !isFunc {
			continue // a type-set term, not a method
		}
		for _, n := range names {
			if !mentions(runDoc, n.Name) {
				add(n.Pos(), what+" "+ts.Name.Name+"."+n.Name+" has no comment")
				break
			}
		}
	}
}

// mentions reports whether text contains name as a whole word.
func mentions(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		before, _ := utf8.DecodeLastRuneInString(text[:j])
		if (j == 0 || !isIdent(before)) && startsWith(text[j:], name) {
			return true
		}
		i = j + len(name)
	}
}

// isIdent reports whether r can be part of an identifier.
func isIdent(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// exportedNames returns the exported identifiers among names.
func exportedNames(names []*ast.Ident) []*ast.Ident {
	var out []*ast.Ident
	for _, n := range names {
		if n.IsExported() {
			out = append(out, n)
		}
	}
	return out
}

// checkDoc reports a missing doc comment, or one that does not start with the identifier's name (after an
// optional "A ", "An " or "The ", as golint allowed). kind prefixes the name in the message: "func",
// "type", "const", "var" or "method T.".
func checkDoc(doc *ast.CommentGroup, id *ast.Ident, kind string, add func(token.Pos, string)) {
	label := kind + " " + id.Name
	if strings.HasSuffix(kind, ".") {
		label = kind + id.Name
	}
	text := docText(doc)
	if text == "" {
		add(id.Pos(), label+" has no doc comment")
		return
	}
	for _, article := range []string{"A ", "An ", "The "} {
		if rest, ok := strings.CutPrefix(text, article); ok && startsWith(rest, id.Name) {
			return
		}
	}
	if !startsWith(text, id.Name) {
		first, _, _ := strings.Cut(text, "\n")
		if len(first) > 40 {
			first = first[:40] + "..."
		}
		add(id.Pos(), label+"'s doc comment should start with its name: "+`"`+id.Name+` ..." (it starts "`+first+`")`)
	}
}

// docText is the text of a comment group without comment markers and compiler directives (//go:build,
// //go:generate), trimmed; "" for no comment.
func docText(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	return strings.TrimSpace(cg.Text())
}

// startsWith reports whether text starts with the word w: w followed by the end of the text or by a
// character that cannot continue an identifier ("Open opens", "Open's", "Open."), so "Opener" does not
// start with "Open".
func startsWith(text, w string) bool {
	rest, ok := strings.CutPrefix(text, w)
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !isIdent(r)
}
