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

func strCol[T any](name, doc string, get func(*T) *string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			sb := b.(*array.StringBuilder)
			return func(r *T) { sb.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			sa := a.(*array.String)
			return func(i int, r *T) { *get(r) = sa.Value(i) }
		},
	}
}

// textCol is a strCol for long free text, stored without dictionary encoding.
func textCol[T any](name, doc string, get func(*T) *string) column[T] {
	return noDictionary(strCol(name, doc, get))
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
			return func(r *T) {
				if p := *get(r); p != nil {
					sb.Append(*p)
				} else {
					sb.AppendNull()
				}
			}
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
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			ib := b.(*array.Int32Builder)
			return func(r *T) { ib.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			v := a.(*array.Int32).Int32Values()
			return func(i int, r *T) { *get(r) = v[i] }
		},
	}
}

func i64Col[T any](name, doc string, get func(*T) *int64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			ib := b.(*array.Int64Builder)
			return func(r *T) { ib.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			v := a.(*array.Int64).Int64Values()
			return func(i int, r *T) { *get(r) = v[i] }
		},
	}
}

func f64Col[T any](name, doc string, get func(*T) *float64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			fb := b.(*array.Float64Builder)
			return func(r *T) { fb.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			v := a.(*array.Float64).Float64Values()
			return func(i int, r *T) { *get(r) = v[i] }
		},
	}
}

func boolCol[T any](name, doc string, get func(*T) *bool) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.FixedWidthTypes.Boolean},
		doc:   doc,
		enc: func(b array.Builder) func(*T) {
			bb := b.(*array.BooleanBuilder)
			return func(r *T) { bb.Append(*get(r)) }
		},
		dec: func(a arrow.Array) func(int, *T) {
			ba := a.(*array.Boolean)
			return func(i int, r *T) { *get(r) = ba.Value(i) }
		},
	}
}

// i32ListCol is a nullable list<int32>.
func i32ListCol[T any](name, doc string, get func(*T) *[]int32) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: listOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		doc:   doc,
		plain: true,
		enc: func(b array.Builder) func(*T) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			return func(r *T) {
				v := *get(r)
				if v == nil {
					lb.AppendNull()
					return
				}
				lb.Append(true)
				vb.AppendValues(v, nil)
			}
		},
		dec: func(a arrow.Array) func(int, *T) {
			la := a.(*array.List)
			vals := la.ListValues().(*array.Int32).Int32Values()
			return func(i int, r *T) {
				if la.IsNull(i) {
					*get(r) = nil
					return
				}
				s, e := la.ValueOffsets(i)
				*get(r) = append(make([]int32, 0, e-s), vals[s:e]...)
			}
		},
	}
}

// f32ListCol is a nullable list<float32>.
func f32ListCol[T any](name, doc string, get func(*T) *[]float32) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: listOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		doc:   doc,
		plain: true,
		enc: func(b array.Builder) func(*T) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.Float32Builder)
			return func(r *T) {
				v := *get(r)
				if v == nil {
					lb.AppendNull()
					return
				}
				lb.Append(true)
				vb.AppendValues(v, nil)
			}
		},
		dec: func(a arrow.Array) func(int, *T) {
			la := a.(*array.List)
			vals := la.ListValues().(*array.Float32).Float32Values()
			return func(i int, r *T) {
				if la.IsNull(i) {
					*get(r) = nil
					return
				}
				s, e := la.ValueOffsets(i)
				*get(r) = append(make([]float32, 0, e-s), vals[s:e]...)
			}
		},
	}
}

// messagesCol is a nullable list<struct{role, content}>.
func messagesCol[T any](name, doc string, get func(*T) *[]Message) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: listOf(messageType), Nullable: true},
		doc:   doc,
		plain: true,
		enc: func(b array.Builder) func(*T) {
			lb := b.(*array.ListBuilder)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			role := sb.FieldBuilder(0).(*array.StringBuilder)
			content := sb.FieldBuilder(1).(*array.StringBuilder)
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
		dec: func(a arrow.Array) func(int, *T) {
			la := a.(*array.List)
			st := la.ListValues().(*array.Struct)
			role := st.Field(0).(*array.String)
			content := st.Field(1).(*array.String)
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
		},
	}
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
			role := sb.FieldBuilder(0).(*array.StringBuilder)
			content := sb.FieldBuilder(1).(*array.StringBuilder)
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
					if t.ToolCalls != nil {
						calls.Append(*t.ToolCalls)
					} else {
						calls.AppendNull()
					}
					if t.TokenIDs != nil {
						ids.Append(true)
						idVals.AppendValues(t.TokenIDs, nil)
					} else {
						ids.AppendNull()
					}
					if t.Logprobs != nil {
						lps.Append(true)
						lpVals.AppendValues(t.Logprobs, nil)
					} else {
						lps.AppendNull()
					}
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
			role := st.Field(0).(*array.String)
			content := st.Field(1).(*array.String)
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
					if !ids.IsNull(j) {
						from, to := ids.ValueOffsets(j)
						t.TokenIDs = append(make([]int32, 0, to-from), idVals[from:to]...)
					}
					if !lps.IsNull(j) {
						from, to := lps.ValueOffsets(j)
						t.Logprobs = append(make([]float32, 0, to-from), lpVals[from:to]...)
					}
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
