package tables

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Value returns element i of an Arrow array as a plain Go value: nil for
// null, bool, int64 (signed integers), uint64 (unsigned), float32,
// float64, string, []byte (binary), time.Time in UTC (timestamps and
// dates), []any (lists), map[string]any (structs, and maps with string
// keys; other maps give []any of {"key", "value"} maps). Other types give
// their Arrow text form.
func Value(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return Value(a.Dictionary(), a.GetValueIndex(i))
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return uint64(a.Value(i))
	case *array.Uint16:
		return uint64(a.Value(i))
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Binary:
		return bytes.Clone(a.Value(i))
	case *array.LargeBinary:
		return bytes.Clone(a.Value(i))
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC()
	case *array.Date32:
		return a.Value(i).ToTime().UTC()
	case *array.Date64:
		return a.Value(i).ToTime().UTC()
	case *array.Map:
		s, e := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		_, strKeys := keys.(stringer)
		if strKeys {
			m := make(map[string]any, e-s)
			for j := s; j < e; j++ {
				m[keys.(stringer).Value(int(j))] = Value(items, int(j))
			}
			return m
		}
		out := make([]any, 0, e-s)
		for j := s; j < e; j++ {
			out = append(out, map[string]any{"key": Value(keys, int(j)), "value": Value(items, int(j))})
		}
		return out
	case array.ListLike:
		s, e := a.ValueOffsets(i)
		vals := a.ListValues()
		out := make([]any, 0, e-s)
		for j := s; j < e; j++ {
			out = append(out, Value(vals, int(j)))
		}
		return out
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, st.NumFields())
		for k, f := range st.Fields() {
			m[f.Name] = Value(a.Field(k), i)
		}
		return m
	}
	return a.ValueStr(i)
}

// appendJSON appends element i of a as JSON, keeping struct fields in
// schema order. NaN and infinities, which JSON cannot hold, become null.
func appendJSON(buf []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(buf, "null"...)
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return appendJSON(buf, a.Dictionary(), a.GetValueIndex(i))
	case *array.Float32:
		return appendFloat(buf, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendFloat(buf, a.Value(i), 64)
	case *array.Map:
		// Value gives a map or a list of key/value maps: both encode.
	case array.ListLike:
		s, e := a.ValueOffsets(i)
		vals := a.ListValues()
		buf = append(buf, '[')
		for j := s; j < e; j++ {
			if j > s {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, vals, int(j))
		}
		return append(buf, ']')
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		buf = append(buf, '{')
		for k, f := range st.Fields() {
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, f.Name)
			buf = append(buf, ':')
			buf = appendJSON(buf, a.Field(k), i)
		}
		return append(buf, '}')
	}
	switch v := Value(a, i).(type) {
	case string:
		return appendJSONString(buf, v)
	case bool:
		return strconv.AppendBool(buf, v)
	case int64:
		return strconv.AppendInt(buf, v, 10)
	case uint64:
		return strconv.AppendUint(buf, v, 10)
	case time.Time:
		return appendJSONString(buf, v.Format(time.RFC3339Nano))
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return append(buf, "null"...)
		}
		return append(buf, b...)
	}
}

func appendFloat(buf []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(buf, "null"...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, bits)
}

// appendJSONString appends s as a JSON string without HTML escaping. A
// string always encodes (invalid UTF-8 becomes U+FFFD); were it not to,
// it would be null, as every value JSON cannot hold is in appendJSON.
func appendJSONString(buf []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return append(buf, "null"...)
	}
	return append(buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// cellText formats element i of a for a CSV cell: "" for null, plain text
// for scalars, JSON for lists, structs and maps.
func cellText(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	switch a.DataType().ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.STRUCT, arrow.MAP:
		return string(appendJSON(nil, a, i))
	}
	switch v := Value(a, i).(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []byte:
		return string(v)
	default:
		return string(appendJSON(nil, a, i))
	}
}
