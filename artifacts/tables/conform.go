package tables

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// match checks a file against a table definition and returns the
// definition as found in the file (with its dynamic columns) and, for each
// of its columns, the file's field index.
func match(f *File, d Definition) (Definition, []int, error) {
	if name, ok := f.Metadata(MetaTable); ok && name != d.Name() {
		return nil, nil, &SchemaError{File: f.name, Table: d.Name(), Want: "table " + d.Name(), Found: "table " + name,
			Hint: "read it as " + name}
	}
	fileVersion := 0 // none recorded: a file another tool wrote
	if v, ok := f.Metadata(MetaSchemaVersion); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, &SchemaError{File: f.name, Table: d.Name(), Want: fmt.Sprintf("schema version 1..%d", d.Version()),
				Found: fmt.Sprintf("schema version %q", v)}
		}
		if n > d.Version() {
			return nil, nil, &SchemaError{File: f.name, Table: d.Name(), Want: fmt.Sprintf("schema version ≤ %d", d.Version()),
				Found: fmt.Sprintf("schema version %d", n), Hint: "the file was written by a newer rlpipe; upgrade to read it"}
		}
		fileVersion = n
	}
	sc := f.Schema()
	var extra []string
	for _, fl := range sc.Fields() {
		if comp, ok := d.extraName(fl.Name); ok && validComponent(comp) == nil {
			extra = append(extra, comp)
		}
	}
	d, err := d.withExtra(extra)
	if err != nil {
		return nil, nil, err
	}
	cols := d.Columns()
	idx := make([]int, len(cols))
	for i, c := range cols {
		found := sc.FieldIndices(c.Name)
		if len(found) == 0 && c.Since > 1 && fileVersion < c.Since {
			idx[i] = -1 // added after the file's version: it reads as null
			continue
		}
		if len(found) == 0 {
			return nil, nil, &SchemaError{File: f.name, Table: d.Name(), Column: c.Name, Want: c.Type.String(),
				Hint: "add the column, or check its spelling"}
		}
		got := sc.Field(found[0]).Type
		added := func(path string) bool { v := c.FieldsSince[path]; return v > 1 && fileVersion < v }
		if path, want, gotS := compatible(c.Name, c.Type, got, added); path != "" {
			return nil, nil, &SchemaError{File: f.name, Table: d.Name(), Column: path, Want: want, Found: gotS,
				Hint: castHint(want)}
		}
		idx[i] = found[0]
	}
	return d, idx, nil
}

func castHint(want string) string {
	switch want {
	case "int32", "int64", "float32", "float64", "bool", "utf8":
		return "cast the column to " + want + " before writing, e.g. pandas astype or DuckDB CAST"
	}
	return ""
}

// compatible reports whether data of type got can be read as want. String
// types (utf8, large_utf8, string_view, dictionary of strings) read as
// utf8; list types (list, large_list, list views) read as list; structs
// match by field name, extra fields ignored. Numbers and booleans must
// match exactly: no silent narrowing or float/int conversion. A struct
// field may be missing only where added(its path) holds: a field added
// after the file's schema version, which reads as null. On a mismatch it
// returns the column path and both types.
func compatible(path string, want, got arrow.DataType, added func(path string) bool) (string, string, string) {
	bad := func() (string, string, string) { return path, want.String(), got.String() }
	switch want.ID() {
	case arrow.STRING:
		if isString(got) {
			return "", "", ""
		}
		return bad()
	case arrow.LIST:
		ll, ok := got.(arrow.ListLikeType)
		if !ok || got.ID() == arrow.FIXED_SIZE_LIST || got.ID() == arrow.MAP {
			return bad()
		}
		return compatible(path+".element", want.(*arrow.ListType).Elem(), ll.Elem(), added)
	case arrow.STRUCT:
		gs, ok := got.(*arrow.StructType)
		if !ok {
			return bad()
		}
		for _, wf := range want.(*arrow.StructType).Fields() {
			gf, ok := gs.FieldByName(wf.Name)
			if !ok && added(path+"."+wf.Name) {
				continue
			}
			if !ok {
				return path + "." + wf.Name, wf.Type.String(), ""
			}
			if p, w, g := compatible(path+"."+wf.Name, wf.Type, gf.Type, added); p != "" {
				return p, w, g
			}
		}
		return "", "", ""
	default:
		if arrow.TypeEqual(want, got) {
			return "", "", ""
		}
		return bad()
	}
}

func isString(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.DICTIONARY:
		return isString(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// conformArray returns a as an array of type want (a compatible type, see
// compatible). Arrays already of that type are returned as they are
// (retained); others are rebuilt, which only files from other tools need.
func conformArray(want arrow.DataType, a arrow.Array) (arrow.Array, error) {
	if arrow.TypeEqual(want, a.DataType()) {
		a.Retain()
		return a, nil
	}
	b := array.NewBuilder(memory.NewGoAllocator(), want)
	defer b.Release()
	b.Reserve(a.Len())
	for i := 0; i < a.Len(); i++ {
		if err := appendFrom(b, a, i); err != nil {
			return nil, err
		}
	}
	return b.NewArray(), nil
}

type stringer interface{ Value(int) string }

// appendFrom appends element i of src to b, converting between compatible
// types.
func appendFrom(b array.Builder, src arrow.Array, i int) error {
	if src.IsNull(i) {
		b.AppendNull()
		return nil
	}
	if d, ok := src.(*array.Dictionary); ok {
		return appendFrom(b, d.Dictionary(), d.GetValueIndex(i))
	}
	switch bb := b.(type) {
	case *array.StringBuilder:
		s, ok := src.(stringer)
		if !ok {
			return fmt.Errorf("cannot read %s as utf8", src.DataType())
		}
		bb.Append(s.Value(i))
	case *array.ListBuilder:
		l, ok := src.(array.ListLike)
		if !ok {
			return fmt.Errorf("cannot read %s as a list", src.DataType())
		}
		s, e := l.ValueOffsets(i)
		bb.Append(true)
		for j := s; j < e; j++ {
			if err := appendFrom(bb.ValueBuilder(), l.ListValues(), int(j)); err != nil {
				return err
			}
		}
	case *array.StructBuilder:
		st, ok := src.(*array.Struct)
		if !ok {
			return fmt.Errorf("cannot read %s as a struct", src.DataType())
		}
		bb.Append(true)
		wt := bb.Type().(*arrow.StructType)
		gt := st.DataType().(*arrow.StructType)
		for k, f := range wt.Fields() {
			gi, ok := gt.FieldIdx(f.Name)
			if !ok { // a field added after the file's version (see compatible)
				bb.FieldBuilder(k).AppendNull()
				continue
			}
			if err := appendFrom(bb.FieldBuilder(k), st.Field(gi), i); err != nil {
				return err
			}
		}
	default:
		// Same primitive type (checked by compatible), different array
		// layout only (e.g. a slice): copy through the generic path.
		if !arrow.TypeEqual(b.Type(), src.DataType()) {
			return fmt.Errorf("cannot read %s as %s", src.DataType(), b.Type())
		}
		return b.AppendValueFromString(src.ValueStr(i))
	}
	return nil
}
