package tables

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Column constructors. Each binds an Arrow column to a field of the row
// type through an accessor that returns a pointer to the field, so the same
// declaration serves encoding and decoding.
//
// Lists are standard three-level Parquet lists whose element field is
// named "element". A nullable list decodes null to a nil slice and an empty
// list to an empty non-nil slice; a required list decodes an empty list to
// nil, so a zero-valued row reads back equal to itself.

// Message is one chat message of a prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Turn is one turn of a trajectory: a message and, for assistant turns that
// call tools, the tool calls as JSON text (nil when there are none).
type Turn struct {
	Role      string  `json:"role"`
	Content   string  `json:"content"`
	ToolCalls *string `json:"tool_calls,omitempty"`
	// TokenIDs and Logprobs are a policy turn's reply as the policy
	// returned it; nil for a turn the policy was given (system,
	// observation, tool result) and where the policy did not return them.
	// An episode's turns' TokenIDs, concatenated, are its TokenIDs.
	TokenIDs []int32   `json:"token_ids,omitempty"`
	Logprobs []float32 `json:"logprobs,omitempty"`
	// Status is one of Statuses: ok, or for the last turn of an episode
	// that did not end ok, the episode's status. "" (null) when unknown:
	// a file written before the column had it.
	Status string `json:"status,omitempty"`
}

var (
	messageType = arrow.StructOf(
		arrow.Field{Name: "role", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "content", Type: arrow.BinaryTypes.String},
	)
	turnType = arrow.StructOf(
		arrow.Field{Name: "role", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "content", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "tool_calls", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "token_ids", Type: listOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		arrow.Field{Name: "logprobs", Type: listOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		arrow.Field{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	)
)

// listOf is a list type whose element field is named "element" (the name
// the Parquet format specifies), with required elements.
func listOf(t arrow.DataType) *arrow.ListType {
	return arrow.ListOfField(arrow.Field{Name: "element", Type: t})
}

// valueBuilder is the Arrow builder of one value type V.
type valueBuilder[V any] interface {
	array.Builder
	Append(V)
}

// valueArray is the Arrow array of one value type V.
type valueArray[V any] interface {
	arrow.Array
	Value(int) V
}

// valueCol is a required column of one Arrow value type: B builds it, A
// reads it, and a row's field is a V.
func valueCol[T, V any, B valueBuilder[V], A valueArray[V]](typ arrow.DataType, name, doc string, get func(*T) *V) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: typ},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			vb := b.(B)
			return func(r *T) { vb.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			va := a.(A)
			return func(i int, r *T) { *get(r) = va.Value(i) }
		},
	}
}

func strCol[T any](name, doc string, get func(*T) *string) column[T] {
	return valueCol[T, string, *array.StringBuilder, *array.String](arrow.BinaryTypes.String, name, doc, get)
}

// textCol is a strCol for long free text, stored without dictionary encoding.
func textCol[T any](name, doc string, get func(*T) *string) column[T] {
	return noDictionary(strCol(name, doc, get))
}

// unique marks a column whose values no two rows share (Column.Unique).
func unique[T any](c column[T]) column[T] {
	c.unique = true
	return c
}

// noDictionary marks a column stored without dictionary encoding (see
// column.plain).
func noDictionary[T any](c column[T]) column[T] {
	c.plain = true
	return c
}

func optStrCol[T any](name, doc string, get func(*T) **string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			sb := b.(*array.StringBuilder)
			return func(r *T) { appendOptStr(sb, *get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			sa := a.(*array.String)
			return func(i int, r *T) {
				if sa.IsNull(i) {
					*get(r) = nil
					return
				}
				v := sa.Value(i)
				*get(r) = &v
			}
		},
	}
}

func i32Col[T any](name, doc string, get func(*T) *int32) column[T] {
	return valueCol[T, int32, *array.Int32Builder, *array.Int32](arrow.PrimitiveTypes.Int32, name, doc, get)
}

func i64Col[T any](name, doc string, get func(*T) *int64) column[T] {
	return valueCol[T, int64, *array.Int64Builder, *array.Int64](arrow.PrimitiveTypes.Int64, name, doc, get)
}

func f64Col[T any](name, doc string, get func(*T) *float64) column[T] {
	return valueCol[T, float64, *array.Float64Builder, *array.Float64](arrow.PrimitiveTypes.Float64, name, doc, get)
}

func boolCol[T any](name, doc string, get func(*T) *bool) column[T] {
	return valueCol[T, bool, *array.BooleanBuilder, *array.Boolean](arrow.FixedWidthTypes.Boolean, name, doc, get)
}

// listValues is the Arrow builder of a list's values of type V.
type listValues[V any] interface {
	array.Builder
	AppendValues([]V, []bool)
}

// valuesArray is the Arrow array of a list's values of type V.
type valuesArray[V any] interface {
	arrow.Array
	Values() []V
}

// listCol is a nullable list of one Arrow value type: B builds the
// values, A reads them.
func listCol[T, V any, B listValues[V], A valuesArray[V]](typ arrow.DataType, name, doc string, get func(*T) *[]V) column[T] {
	return plainList(typ, true, name, doc,
		func(lb *array.ListBuilder) func(*T) {
			vb := lb.ValueBuilder().(B)
			return func(r *T) { appendList(lb, vb, *get(r)) }
		},
		func(la *array.List) func(int, *T) {
			vals := la.ListValues().(A).Values()
			return func(i int, r *T) { *get(r) = listAt(la, vals, i) }
		})
}

// plainList is a plain column of list<elem> whose encoder and decoder
// work on the list builder and the list array.
func plainList[T any](elem arrow.DataType, nullable bool, name, doc string, enc func(*array.ListBuilder) func(*T), dec func(*array.List) func(int, *T)) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: listOf(elem), Nullable: nullable},
		doc:   doc,
		plain: true,
		enc:   func(b array.Builder) func(*T) { return enc(b.(*array.ListBuilder)) },
		dec:   func(a arrow.Array) func(int, *T) { return dec(a.(*array.List)) },
	}
}

// appendList appends v to a list column: nil as null, otherwise a list
// (empty for an empty slice).
func appendList[V any, B listValues[V]](lb *array.ListBuilder, vb B, v []V) {
	if v == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	vb.AppendValues(v, nil)
}

// listAt is the list at row i of la, whose values are vals: nil when
// null, otherwise a copy (empty, not nil, for an empty list).
func listAt[V any](la *array.List, vals []V, i int) []V {
	if la.IsNull(i) {
		return nil
	}
	s, e := la.ValueOffsets(i)
	return append(make([]V, 0, e-s), vals[s:e]...)
}

// appendOptStr appends *p, or null when p is nil.
func appendOptStr(sb *array.StringBuilder, p *string) {
	if p != nil {
		sb.Append(*p)
	} else {
		sb.AppendNull()
	}
}

// roleContentBuilders are the builders of the fields a message and a turn
// begin with: role and content.
func roleContentBuilders(sb *array.StructBuilder) (role, content *array.StringBuilder) {
	return sb.FieldBuilder(0).(*array.StringBuilder), sb.FieldBuilder(1).(*array.StringBuilder)
}

// roleContentArrays are the role and content fields of a message or a
// turn struct array.
func roleContentArrays(st *array.Struct) (role, content *array.String) {
	return st.Field(0).(*array.String), st.Field(1).(*array.String)
}

// i32ListCol is a nullable list<int32>.
func i32ListCol[T any](name, doc string, get func(*T) *[]int32) column[T] {
	return listCol[T, int32, *array.Int32Builder, *array.Int32](arrow.PrimitiveTypes.Int32, name, doc, get)
}

// f32ListCol is a nullable list<float32>.
func f32ListCol[T any](name, doc string, get func(*T) *[]float32) column[T] {
	return listCol[T, float32, *array.Float32Builder, *array.Float32](arrow.PrimitiveTypes.Float32, name, doc, get)
}

// f64ListCol is a nullable list<float64>.
func f64ListCol[T any](name, doc string, get func(*T) *[]float64) column[T] {
	return listCol[T, float64, *array.Float64Builder, *array.Float64](arrow.PrimitiveTypes.Float64, name, doc, get)
}

// messagesCol is a nullable list<struct{role, content}>.
func messagesCol[T any](name, doc string, get func(*T) *[]Message) column[T] {
	return plainList(messageType, true, name, doc,
		func(lb *array.ListBuilder) func(*T) {
			sb := lb.ValueBuilder().(*array.StructBuilder)
			role, content := roleContentBuilders(sb)
			return func(r *T) {
				v := *get(r)
				if v == nil {
					lb.AppendNull()
					return
				}
				lb.Append(true)
				for _, m := range v {
					sb.Append(true)
					role.Append(m.Role)
					content.Append(m.Content)
				}
			}
		},
		func(la *array.List) func(int, *T) {
			st := la.ListValues().(*array.Struct)
			role, content := roleContentArrays(st)
			return func(i int, r *T) {
				if la.IsNull(i) {
					*get(r) = nil
					return
				}
				s, e := la.ValueOffsets(i)
				out := make([]Message, e-s)
				for j := s; j < e; j++ {
					out[j-s] = Message{Role: role.Value(int(j)), Content: content.Value(int(j))}
				}
				*get(r) = out
			}
		})
}

// turnsCol is a required list<struct{role, content, tool_calls, token_ids,
// logprobs, status}>. Within a turn, a nil slice is null and an empty one
// an empty list; an empty status is null.
func turnsCol[T any](name, doc string, get func(*T) *[]Turn) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: listOf(turnType)},
		doc:   doc,
		plain: true,
		enc: func(b array.Builder) func(*T) {
			lb := b.(*array.ListBuilder)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			role, content := roleContentBuilders(sb)
			calls := sb.FieldBuilder(2).(*array.StringBuilder)
			ids := sb.FieldBuilder(3).(*array.ListBuilder)
			idVals := ids.ValueBuilder().(*array.Int32Builder)
			lps := sb.FieldBuilder(4).(*array.ListBuilder)
			lpVals := lps.ValueBuilder().(*array.Float32Builder)
			status := sb.FieldBuilder(5).(*array.StringBuilder)
			return func(r *T) {
				lb.Append(true)
				for _, t := range *get(r) {
					sb.Append(true)
					role.Append(t.Role)
					content.Append(t.Content)
					appendOptStr(calls, t.ToolCalls)
					appendList(ids, idVals, t.TokenIDs)
					appendList(lps, lpVals, t.Logprobs)
					if t.Status != "" {
						status.Append(t.Status)
					} else {
						status.AppendNull()
					}
				}
			}
		},
		dec: func(a arrow.Array) func(int, *T) {
			la := a.(*array.List)
			st := la.ListValues().(*array.Struct)
			role, content := roleContentArrays(st)
			calls := st.Field(2).(*array.String)
			ids := st.Field(3).(*array.List)
			idVals := ids.ListValues().(*array.Int32).Int32Values()
			lps := st.Field(4).(*array.List)
			lpVals := lps.ListValues().(*array.Float32).Float32Values()
			status := st.Field(5).(*array.String)
			return func(i int, r *T) {
				s, e := la.ValueOffsets(i)
				if s == e {
					*get(r) = nil
					return
				}
				out := make([]Turn, e-s)
				for j := int(s); j < int(e); j++ {
					t := Turn{Role: role.Value(j), Content: content.Value(j)}
					if !calls.IsNull(j) {
						v := calls.Value(j)
						t.ToolCalls = &v
					}
					t.TokenIDs = listAt(ids, idVals, j)
					t.Logprobs = listAt(lps, lpVals, j)
					if !status.IsNull(j) {
						t.Status = status.Value(j)
					}
					out[j-int(s)] = t
				}
				*get(r) = out
			}
		},
	}
}
