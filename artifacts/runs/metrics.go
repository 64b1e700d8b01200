package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
)

// IterationMetrics summarise an iteration's tasks. They hold timings, so
// they are committed beside the events (MetricsPath), not among the
// iteration's artifacts, which stay byte-identical across runs.
type IterationMetrics struct {
	Iteration int                    `json:"iteration"`
	Tasks     map[string]TaskMetrics `json:"tasks"`
}

// TaskMetrics describe one task call in an iteration.
type TaskMetrics struct {
	Attempts int     `json:"attempts"`
	Cached   bool    `json:"cached"`
	Seconds  float64 `json:"seconds"`
	Key      string  `json:"key"`
}

// ReadMetrics reads iteration n's IterationMetrics at ref; nil, nil when
// the iteration has none.
func ReadMetrics(ctx context.Context, st artifacts.Store, ref string, n int) (*IterationMetrics, error) {
	var m IterationMetrics
	ok, err := readJSON(ctx, st, ref, MetricsPath(n), &m)
	if err != nil || !ok {
		return nil, err
	}
	return &m, nil
}

// TrainMetrics are the figures a train stage wrote for its step
// (TrainMetricsFile), whatever the trainer: every number of the JSON
// object, nested objects' keys joined by dots ("loss",
// "reward.mean", "reward_components.correct.mean").
type TrainMetrics struct {
	// Values holds the finite numbers; a numeric string counts (the
	// stand-in trainer writes them).
	Values map[string]float64
	// NotComputed names, sorted, the figures the trainer wrote as null:
	// not measured (kl at β = 0), never to be shown as 0.
	NotComputed []string
}

// Get returns a figure and whether the trainer wrote it as a number.
func (m *TrainMetrics) Get(name string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	v, ok := m.Values[name]
	return v, ok
}

// ParseTrainMetrics reads a train metrics file: a JSON object, whose
// nested objects (three levels deep) are flattened; arrays and other
// values are left out.
func ParseTrainMetrics(raw []byte) (*TrainMetrics, error) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("train metrics: want a JSON object: %w", err)
	}
	if v == nil {
		return nil, errors.New("train metrics: want a JSON object, got null")
	}
	m := &TrainMetrics{Values: map[string]float64{}}
	var walk func(prefix string, obj map[string]any, depth int)
	walk = func(prefix string, obj map[string]any, depth int) {
		for k, x := range obj {
			name := prefix + k
			switch x := x.(type) {
			case json.Number:
				if f, err := x.Float64(); err == nil && finite(f) {
					m.Values[name] = f
				}
			case string:
				if f, err := strconv.ParseFloat(x, 64); err == nil && finite(f) {
					m.Values[name] = f
				}
			case nil:
				m.NotComputed = append(m.NotComputed, name)
			case map[string]any:
				if depth < 3 {
					walk(name+".", x, depth+1)
				}
			}
		}
	}
	walk("", v, 0)
	sort.Strings(m.NotComputed)
	return m, nil
}

// ReadTrainMetrics reads iteration n's train metrics at ref: its
// TrainMetricsFile, else the first other *metrics.json file of its
// directory (a trainer that names its file differently). It returns nil,
// nil when there is none, or when the file is not a JSON object (a
// trainer of another shape: its figures are not shown, the run is not
// failed).
func ReadTrainMetrics(ctx context.Context, st artifacts.Store, ref string, n int) (*TrainMetrics, error) {
	path := IterationPath(n, TrainMetricsFile)
	raw, err := readSmall(ctx, st, ref, path)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		dir := IterationDir(n) + "/"
		for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: dir, Delimiter: "/"}) {
			if err != nil {
				return nil, fmt.Errorf("list %s:%s: %w", ref, dir, err)
			}
			if !e.CommonPrefix && strings.HasSuffix(e.Path, "metrics.json") {
				if raw, err = readSmall(ctx, st, ref, e.Path); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	if raw == nil {
		return nil, nil
	}
	m, err := ParseTrainMetrics(raw)
	if err != nil {
		return nil, nil
	}
	return m, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
