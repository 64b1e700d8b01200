package reports

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

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
	HealthTableVersion = 1
	// HealthPath is where SaveHealth puts the table on a run branch.
	HealthPath = runs.HealthReportPath
)

type healthCol struct {
	name string
	typ  arrow.DataType // Int32 (required) or Float64 (nullable: NaN is null)
	get  func(*Health) float64
}

func f64(name string, get func(*Health) float64) healthCol {
	return healthCol{name, arrow.PrimitiveTypes.Float64, get}
}

func i32(name string, get func(*Health) int) healthCol {
	return healthCol{name, arrow.PrimitiveTypes.Int32, func(h *Health) float64 { return float64(get(h)) }}
}

var healthCols = []healthCol{
	i32("iteration", func(h *Health) int { return h.Iteration }),
	i32("samples", func(h *Health) int { return h.Samples }),
	i32("scored", func(h *Health) int { return h.Scored }),
	i32("errored", func(h *Health) int { return h.Errored }),
	i32("timed_out", func(h *Health) int { return h.TimedOut }),
	i32("truncated", func(h *Health) int { return h.Truncated }),
	f64("reward_mean", func(h *Health) float64 { return h.Reward.Mean }),
	f64("reward_std", func(h *Health) float64 { return h.Reward.Std }),
	f64("reward_min", func(h *Health) float64 { return h.Reward.Min }),
	f64("reward_max", func(h *Health) float64 { return h.Reward.Max }),
	i32("groups", func(h *Health) int { return h.Groups }),
	f64("frac_reward_zero_std", func(h *Health) float64 { return h.FracZeroStd }),
	f64("frac_solved_all", func(h *Health) float64 { return h.FracSolvedAll }),
	f64("frac_solved_none", func(h *Health) float64 { return h.FracSolvedNone }),
	f64("frac_mixed", func(h *Health) float64 { return h.FracMixed }),
	f64("response_length_mean", func(h *Health) float64 { return h.LengthMean }),
	i32("response_length_max", func(h *Health) int { return h.LengthMax }),
	f64("response_chars_mean", func(h *Health) float64 { return h.CharsMean }),
	f64("frac_finish_length", func(h *Health) float64 { return h.FracLength }),
	f64("staleness_mean", func(h *Health) float64 { return h.StalenessMean }),
	f64("top_completion_share", func(h *Health) float64 { return h.TopShare }),
	i32("top_completion_prompts", func(h *Health) int { return h.TopPrompts }),
	f64("judge_verifier_disagreement", func(h *Health) float64 { return h.Disagreement }),
	f64("format_mean", func(h *Health) float64 { return h.FormatMean }),
	f64("correct_mean", func(h *Health) float64 { return h.CorrectMean }),
	f64("format_without_correct", func(h *Health) float64 { return h.FormatWithoutCorrect }),
	f64("loss", func(h *Health) float64 { return h.Loss }),
	f64("policy_loss", func(h *Health) float64 { return h.PolicyLoss }),
	f64("kl", func(h *Health) float64 { return h.KL }),
	f64("entropy", func(h *Health) float64 { return h.Entropy }),
	f64("clip_frac_low", func(h *Health) float64 { return h.ClipLow }),
	f64("clip_frac_high", func(h *Health) float64 { return h.ClipHigh }),
	f64("ratio_dev", func(h *Health) float64 { return h.RatioDev }),
	f64("grad_norm", func(h *Health) float64 { return h.GradNorm }),
}

// componentStats are the per-component columns: r_<name>_<stat>.
var componentStats = []struct {
	suffix string
	get    func(Stat) float64
}{
	{"mean", func(s Stat) float64 { return s.Mean }},
	{"std", func(s Stat) float64 { return s.Std }},
	{"min", func(s Stat) float64 { return s.Min }},
	{"max", func(s Stat) float64 { return s.Max }},
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
// reward components: the fixed columns, then r_<component>_mean, _std,
// _min and _max for each.
func HealthSchema(components []string) *arrow.Schema {
	fields := make([]arrow.Field, 0, len(healthCols)+4*len(components))
	for _, c := range healthCols {
		fields = append(fields, arrow.Field{Name: c.name, Type: c.typ, Nullable: c.typ.ID() == arrow.FLOAT64})
	}
	for _, n := range components {
		for _, s := range componentStats {
			fields = append(fields, arrow.Field{Name: tables.ComponentPrefix + n + "_" + s.suffix, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
		}
	}
	md := arrow.NewMetadata([]string{tables.MetaTable, tables.MetaSchemaVersion}, []string{HealthTableName, strconv.Itoa(HealthTableVersion)})
	return arrow.NewSchema(fields, &md)
}

// WriteHealth writes rows (in iteration order) as the health table. NaN
// values are nulls. The bytes depend only on the rows.
func WriteHealth(w io.Writer, rows []Health) error {
	rows = slices.Clone(rows)
	sortHealth(rows)
	comps := allComponents(rows)
	schema := HealthSchema(comps)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := range rows {
		h := &rows[i]
		for j, c := range healthCols {
			v := c.get(h)
			switch fb := b.Field(j).(type) {
			case *array.Int32Builder:
				fb.Append(int32(v))
			case *array.Float64Builder:
				appendFloat(fb, v)
			}
		}
		j := len(healthCols)
		for _, n := range comps {
			s, ok := h.Components[n]
			for _, cs := range componentStats {
				v := math.NaN()
				if ok {
					v = cs.get(s)
				}
				appendFloat(b.Field(j).(*array.Float64Builder), v)
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
