package bundle

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// The operator-sdk's CSV markers, read from the API types the way its
// `generate kustomize manifests` does (the CLI is not available here):
//
//	+operator-sdk:csv:customresourcedefinitions:displayName="Model Route",resources={{Deployment,v1,""}}
//
// on a kind's type sets the owned CRD's display name and the kinds it
// creates, and
//
//	+operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Models",xDescriptors={"urn:..."}
//
// on a field adds a spec (or status) descriptor whose path is the field's
// JSON path below spec (or status) and whose description is the field's
// comment.
const csvMarker = "+operator-sdk:csv:customresourcedefinitions:"

// Descriptor is a CSV spec or status descriptor.
type Descriptor struct {
	Path         string   `json:"path"`
	DisplayName  string   `json:"displayName,omitempty"`
	Description  string   `json:"description,omitempty"`
	XDescriptors []string `json:"x-descriptors,omitempty"`
}

// Resource is a kind an owned CRD's objects create.
type Resource struct {
	Kind    string `json:"kind"`
	Version string `json:"version"`
	Name    string `json:"name,omitempty"`
}

// KindMarkers is what the markers say of one kind.
type KindMarkers struct {
	DisplayName string
	Resources   []Resource
	Spec        []Descriptor
	Status      []Descriptor
}

type goField struct {
	name, json, doc string
	inline          bool
	typ             ast.Expr
	marker          map[string]string
}

type goType struct {
	doc    string
	root   bool
	fields []goField
}

// ReadMarkers parses the Go files of dir (the API package) and returns the
// markers of every root kind with a spec, by kind.
func ReadMarkers(dir string) (map[string]KindMarkers, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	types := map[string]*goType{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				t := &goType{doc: commentText(doc)}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						t.fields = append(t.fields, fieldOf(fl))
					}
				}
				t.root = isKind(t)
				types[ts.Name.Name] = t
			}
		}
	}

	out := map[string]KindMarkers{}
	for name, t := range types {
		if !t.root {
			continue
		}
		var specType, statusType string
		for _, f := range t.fields {
			switch f.json {
			case "spec":
				specType = typeName(f.typ)
			case "status":
				statusType = typeName(f.typ)
			}
		}
		if specType == "" {
			continue
		}
		km := KindMarkers{}
		if m, err := typeMarker(types[name].doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		} else if m != nil {
			km.DisplayName = m["displayName"]
			if km.Resources, err = parseResources(m["resources"]); err != nil {
				return nil, fmt.Errorf("%s: resources: %w", name, err)
			}
		}
		if err := walk(types, specType, "", "spec", &km.Spec, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if statusType != "" {
			if err := walk(types, statusType, "", "status", &km.Status, 0); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		out[name] = km
	}
	return out, nil
}

// isKind reports whether a struct is an API kind: it embeds ObjectMeta.
func isKind(t *goType) bool {
	for _, f := range t.fields {
		if sel, ok := f.typ.(*ast.SelectorExpr); ok && sel.Sel.Name == "ObjectMeta" {
			return true
		}
	}
	return false
}

func fieldOf(fl *ast.Field) goField {
	f := goField{typ: fl.Type, doc: commentText(fl.Doc)}
	if len(fl.Names) > 0 {
		f.name = fl.Names[0].Name
	}
	if fl.Tag != nil {
		tag, _ := strconv.Unquote(fl.Tag.Value)
		j := reflect.StructTag(tag).Get("json")
		parts := strings.Split(j, ",")
		f.json = parts[0]
		for _, p := range parts[1:] {
			if p == "inline" {
				f.inline = true
			}
		}
	}
	if len(fl.Names) == 0 && f.json == "" {
		f.inline = true // an embedded struct without a JSON name is flattened
	}
	if fl.Doc != nil {
		for _, c := range fl.Doc.List {
			line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if rest, ok := strings.CutPrefix(line, csvMarker); ok {
				f.marker = parseArgs(rest)
			}
		}
	}
	return f
}

// commentText is a comment's prose: marker lines dropped, lines joined.
func commentText(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var lines []string
	for _, c := range cg.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if strings.HasPrefix(line, "+") {
			lines = append(lines, line) // markers stay for typeMarker; prose() drops them
			continue
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func prose(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if l != "" && !strings.HasPrefix(l, "+") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

func typeMarker(doc string) (map[string]string, error) {
	for _, l := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(l, csvMarker); ok {
			m := parseArgs(rest)
			if m["type"] != "" {
				return nil, fmt.Errorf("a type marker cannot set type= (that is for fields): %s", l)
			}
			return m, nil
		}
	}
	return nil, nil
}

// walk collects the descriptors of kind ("spec" or "status") below typ,
// whose fields' paths start with prefix.
func walk(types map[string]*goType, typ, prefix, kind string, out *[]Descriptor, depth int) error {
	t := types[typ]
	if t == nil || depth > 8 {
		return nil
	}
	for _, f := range t.fields {
		if f.inline {
			if err := walk(types, typeName(f.typ), prefix, kind, out, depth+1); err != nil {
				return err
			}
			continue
		}
		if f.json == "" || f.json == "-" {
			continue
		}
		path := prefix + f.json
		if m := f.marker; m != nil {
			switch m["type"] {
			case kind:
				*out = append(*out, Descriptor{Path: path, DisplayName: m["displayName"], Description: prose(f.doc),
					XDescriptors: parseList(m["xDescriptors"])})
			case "spec", "status":
			default:
				return fmt.Errorf("field %s: marker type=%q, want spec or status", path, m["type"])
			}
		}
		child := path + "."
		if isSlice(f.typ) {
			child = path + "[0]."
		}
		if err := walk(types, typeName(f.typ), child, kind, out, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// typeName is the local type a field's type names through pointers and
// slices ("" for maps, other packages' types and builtins without fields).
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.ArrayType:
		return typeName(t.Elt)
	}
	return ""
}

func isSlice(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.StarExpr:
		return isSlice(t.X)
	case *ast.ArrayType:
		return true
	}
	return false
}

// parseArgs splits a marker's arguments key=value,key=value at the top level
// (commas inside quotes or braces belong to the value); quoted values are unquoted.
func parseArgs(s string) map[string]string {
	out := map[string]string{}
	for _, part := range splitTop(s, ',') {
		k, v, _ := strings.Cut(part, "=")
		out[strings.TrimSpace(k)] = unquote(strings.TrimSpace(v))
	}
	return out
}

// parseList reads {"a","b"} into its elements.
func parseList(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	var out []string
	for _, p := range splitTop(s, ',') {
		if v := unquote(strings.TrimSpace(p)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseResources reads {{Kind,version,name},...}.
func parseResources(s string) ([]Resource, error) {
	var out []Resource
	for _, item := range parseList(s) {
		fields := splitTop(strings.TrimSuffix(strings.TrimPrefix(item, "{"), "}"), ',')
		if len(fields) != 3 {
			return nil, fmt.Errorf("%q is not {Kind,version,name}", item)
		}
		out = append(out, Resource{Kind: strings.TrimSpace(fields[0]), Version: strings.TrimSpace(fields[1]),
			Name: unquote(strings.TrimSpace(fields[2]))})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out, nil
}

func splitTop(s string, sep rune) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '"' && (i == 0 || s[i-1] != '\\'):
			quoted = !quoted
		case quoted:
		case r == '{':
			depth++
		case r == '}':
			depth--
		case r == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}
