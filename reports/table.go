package reports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// The health table: one row per iteration, written as Parquet that DuckDB,
// pandas and polars open. docs/REPORTS.md documents the columns.
const (
	HealthTableName    = "health"
	HealthTableVersion = 3
	// HealthPath is where SaveHealth puts the table on a run branch.
	HealthPath = runs.HealthReportPath
)

// healthCol is a column of the health table and the Health field it
// holds: field returns a pointer to it, *int (an Int32 column, required),
// *float64 (Float64, nullable: NaN is null) or *string (String, required).
type healthCol struct {
	name  string
	field func(*Health) any
}

var healthCols = []healthCol{
	{"iteration", func(h *Health) any { return &h.Iteration }},
	{"samples", func(h *Health) any { return &h.Samples }},
	{"scored", func(h *Health) any { return &h.Scored }},
	{"errored", func(h *Health) any { return &h.Errored }},
	{"timed_out", func(h *Health) any { return &h.TimedOut }},
	{"truncated", func(h *Health) any { return &h.Truncated }},
	{"reward_mean", func(h *Health) any { return &h.Reward.Mean }},
	{"reward_std", func(h *Health) any { return &h.Reward.Std }},
	{"reward_min", func(h *Health) any { return &h.Reward.Min }},
	{"reward_max", func(h *Health) any { return &h.Reward.Max }},
	{"groups", func(h *Health) any { return &h.Groups }},
	{"frac_reward_zero_std", func(h *Health) any { return &h.FracZeroStd }},
	{"frac_solved_all", func(h *Health) any { return &h.FracSolvedAll }},
	{"frac_solved_none", func(h *Health) any { return &h.FracSolvedNone }},
	{"frac_mixed", func(h *Health) any { return &h.FracMixed }},
	{"response_length_mean", func(h *Health) any { return &h.LengthMean }},
	{"response_length_max", func(h *Health) any { return &h.LengthMax }},
	{"response_chars_mean", func(h *Health) any { return &h.CharsMean }},
	{"frac_finish_length", func(h *Health) any { return &h.FracLength }},
	{"staleness_mean", func(h *Health) any { return &h.StalenessMean }},
	{"top_completion_share", func(h *Health) any { return &h.TopShare }},
	{"top_completion_prompts", func(h *Health) any { return &h.TopPrompts }},
	{"top_completion", func(h *Health) any { return &h.TopCompletion }},
	{"judge_verifier_disagreement", func(h *Health) any { return &h.Disagreement }},
	{"format_mean", func(h *Health) any { return &h.FormatMean }},
	{"correct_mean", func(h *Health) any { return &h.CorrectMean }},
	{"format_without_correct", func(h *Health) any { return &h.FormatWithoutCorrect }},
	{"loss", func(h *Health) any { return &h.Loss }},
	{"policy_loss", func(h *Health) any { return &h.PolicyLoss }},
	{"kl", func(h *Health) any { return &h.KL }},
	{"entropy", func(h *Health) any { return &h.Entropy }},
	{"clip_frac_low", func(h *Health) any { return &h.ClipLow }},
	{"clip_frac_high", func(h *Health) any { return &h.ClipHigh }},
	{"ratio_dev", func(h *Health) any { return &h.RatioDev }},
	{"grad_norm", func(h *Health) any { return &h.GradNorm }},
	{"mismatch_kl", func(h *Health) any { return &h.MismatchKL }},
	{"ratio_max", func(h *Health) any { return &h.RatioMax }},
}

// colType is the Arrow type of a column holding *field.
func colType(field any) arrow.DataType {
	switch field.(type) {
	case *int:
		return arrow.PrimitiveTypes.Int32
	case *string:
		return arrow.BinaryTypes.String
	default:
		return arrow.PrimitiveTypes.Float64
	}
}

// componentStats are the per-component columns: r_<name>_<stat>. Every
// one is nullable: a row without the component (not in its
// ComponentNames) has nulls; count 0 and null figures mean the row has
// the component but no finite value of it.
var componentStats = []struct {
	suffix string
	field  func(*Stat) any
}{
	{"count", func(s *Stat) any { return &s.Count }},
	{"mean", func(s *Stat) any { return &s.Mean }},
	{"std", func(s *Stat) any { return &s.Std }},
	{"min", func(s *Stat) any { return &s.Min }},
	{"max", func(s *Stat) any { return &s.Max }},
}

// allComponents is the union of the rows' component names, sorted.
func allComponents(rows []Health) []string {
	var names []string
	for _, h := range rows {
		for _, n := range h.ComponentNames {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// HealthSchema is the health table's Arrow schema for rows with the given
// reward components: the fixed columns, then r_<component>_count, _mean,
// _std, _min and _max for each.
func HealthSchema(components []string) *arrow.Schema { return healthSchema(components, nil) }

// healthSchema is HealthSchema with more key-value metadata (sorted by
// key, so that the bytes depend only on its content).
func healthSchema(components []string, meta map[string]string) *arrow.Schema {
	fields := make([]arrow.Field, 0, len(healthCols)+len(componentStats)*len(components))
	for _, c := range healthCols {
		typ := colType(c.field(&Health{}))
		fields = append(fields, arrow.Field{Name: c.name, Type: typ, Nullable: typ.ID() == arrow.FLOAT64})
	}
	for _, n := range components {
		for _, s := range componentStats {
			fields = append(fields, arrow.Field{Name: tables.ComponentPrefix + n + "_" + s.suffix, Type: colType(s.field(&Stat{})), Nullable: true})
		}
	}
	keys := []string{tables.MetaTable, tables.MetaSchemaVersion}
	vals := []string{HealthTableName, strconv.Itoa(HealthTableVersion)}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		keys, vals = append(keys, k), append(vals, meta[k])
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// WriteHealth writes rows (in iteration order) as the health table. NaN
// values are nulls. The bytes depend only on the rows.
func WriteHealth(w io.Writer, rows []Health) error { return writeHealth(w, rows, nil) }

// writeHealth is WriteHealth with more key-value metadata in the file.
func writeHealth(w io.Writer, rows []Health, meta map[string]string) error {
	rows = slices.Clone(rows)
	sortHealth(rows)
	comps := allComponents(rows)
	schema := healthSchema(comps, meta)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := range rows {
		h := &rows[i]
		for j, c := range healthCols {
			appendField(b.Field(j), c.field(h), true)
		}
		j := len(healthCols)
		for _, n := range comps {
			s, ok := h.Components[n]
			if !ok {
				// In ComponentNames without a finite value: count 0.
				s = Stat{Mean: math.NaN(), Std: math.NaN(), Min: math.NaN(), Max: math.NaN()}
			}
			has := ok || slices.Contains(h.ComponentNames, n)
			for _, cs := range componentStats {
				appendField(b.Field(j), cs.field(&s), has)
				j++
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rw, err := tables.NewRecordWriter(w, schema, nil)
	if err != nil {
		return fmt.Errorf("write health table: %w", err)
	}
	if err := rw.Write(rec); err != nil {
		return fmt.Errorf("write health table: %w", err)
	}
	if err := rw.Close(); err != nil {
		return fmt.Errorf("write health table: %w", err)
	}
	return nil
}

// appendField appends *field to b, or a null when !valid.
func appendField(b array.Builder, field any, valid bool) {
	if !valid {
		b.AppendNull()
		return
	}
	switch v := field.(type) {
	case *int:
		b.(*array.Int32Builder).Append(int32(*v))
	case *string:
		b.(*array.StringBuilder).Append(*v)
	case *float64:
		appendFloat(b.(*array.Float64Builder), *v)
	}
}

// readHealth reads the rows of a health table of this schema version
// (WriteHealth's), Health for Health: ComponentNames are the components
// whose count is not null, Reward.Count is Scored.
func readHealth(ctx context.Context, f *tables.File) ([]Health, error) {
	if name, v := f.Table(); name != HealthTableName || v != HealthTableVersion {
		return nil, fmt.Errorf("%s: table %q version %d, not %s version %d", f.Name(), name, v, HealthTableName, HealthTableVersion)
	}
	var out []Health
	for rec, err := range f.Records(ctx) {
		if err != nil {
			return nil, err
		}
		cols := map[string]arrow.Array{}
		for i, fd := range rec.Schema().Fields() {
			cols[fd.Name] = rec.Column(i)
		}
		var comps []string
		for _, fd := range rec.Schema().Fields() {
			if n, ok := strings.CutPrefix(fd.Name, tables.ComponentPrefix); ok {
				if n, ok = strings.CutSuffix(n, "_"+componentStats[0].suffix); ok {
					comps = append(comps, n)
				}
			}
		}
		slices.Sort(comps)
		for r := 0; r < int(rec.NumRows()); r++ {
			var h Health
			for _, c := range healthCols {
				if err := readField(cols[c.name], r, c.field(&h)); err != nil {
					return nil, fmt.Errorf("%s: row %d, column %s: %w", f.Name(), len(out), c.name, err)
				}
			}
			h.Reward.Count = h.Scored
			for _, n := range comps {
				if cols[tables.ComponentPrefix+n+"_count"].IsNull(r) {
					continue
				}
				h.ComponentNames = append(h.ComponentNames, n)
				var s Stat
				for _, cs := range componentStats {
					name := tables.ComponentPrefix + n + "_" + cs.suffix
					if err := readField(cols[name], r, cs.field(&s)); err != nil {
						return nil, fmt.Errorf("%s: row %d, column %s: %w", f.Name(), len(out), name, err)
					}
				}
				if s.Count > 0 {
					if h.Components == nil {
						h.Components = map[string]Stat{}
					}
					h.Components[n] = s
				}
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// readField sets *field from row r of col; a null float is NaN.
func readField(col arrow.Array, r int, field any) error {
	if col == nil {
		return errors.New("missing")
	}
	switch v := field.(type) {
	case *int:
		c, ok := col.(*array.Int32)
		if !ok || c.IsNull(r) {
			return fmt.Errorf("want a non-null int32, have %s", col.DataType())
		}
		*v = int(c.Value(r))
	case *string:
		c, ok := col.(*array.String)
		if !ok || c.IsNull(r) {
			return fmt.Errorf("want a non-null string, have %s", col.DataType())
		}
		*v = c.Value(r)
	case *float64:
		c, ok := col.(*array.Float64)
		if !ok {
			return fmt.Errorf("want a float64, have %s", col.DataType())
		}
		*v = math.NaN()
		if !c.IsNull(r) {
			*v = c.Value(r)
		}
	}
	return nil
}

func appendFloat(b *array.Float64Builder, v float64) {
	if math.IsNaN(v) {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

// SaveHealth writes the health table at HealthPath on branch and, unless
// message is empty, commits it (which moves the branch: do it between
// iterations, not while a run holds the branch). It returns the commit
// (zero when only staged).
func SaveHealth(ctx context.Context, st artifacts.Store, branch string, rows []Health, message string) (artifacts.Commit, error) {
	var buf bytes.Buffer
	if err := WriteHealth(&buf, rows); err != nil {
		return artifacts.Commit{}, err
	}
	if _, err := st.PutObject(ctx, branch, HealthPath, &buf, &artifacts.PutOptions{ContentType: "application/vnd.apache.parquet"}); err != nil {
		return artifacts.Commit{}, fmt.Errorf("save %s:%s: %w", branch, HealthPath, err)
	}
	if message == "" {
		return artifacts.Commit{}, nil
	}
	c, err := st.Commit(ctx, branch, message, nil)
	if err != nil {
		return artifacts.Commit{}, fmt.Errorf("commit %s on %s: %w", HealthPath, branch, err)
	}
	return c, nil
}
