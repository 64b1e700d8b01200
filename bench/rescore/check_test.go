package rescore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// result is one reward row as a contender wrote it. Null values read as
// NaN.
type result struct {
	seen                           bool
	status                         string
	correct, format, length, total float64
}

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func (r result) equal(o result) bool {
	return r.seen == o.seen && r.status == o.status && sameFloat(r.correct, o.correct) &&
		sameFloat(r.format, o.format) && sameFloat(r.length, o.length) && sameFloat(r.total, o.total)
}

func (r result) String() string {
	if !r.seen {
		return "missing"
	}
	return fmt.Sprintf("%s correct=%v format=%v length=%v total=%v", r.status, r.correct, r.format, r.length, r.total)
}

// totals sums a contender's rewards in row order, so that the sums of
// equal rows are equal to the last bit.
type totals struct {
	rows, ok        int
	correct, format float64
	length, total   float64
}

func sumUp(rs []result) totals {
	var t totals
	for _, r := range rs {
		if !r.seen {
			continue
		}
		t.rows++
		if r.status != "ok" {
			continue
		}
		t.ok++
		t.correct += r.correct
		t.format += r.format
		t.length += r.length
		t.total += r.total
	}
	return t
}

// rowOf places a reward row by its key: prompt number × 8 + sample.
func (d *dataset) rowOf(promptID string, sample int64) (int, error) {
	p, ok := d.promptIndex[promptID]
	if !ok || sample < 0 || sample >= samplesPerPrompt {
		return 0, fmt.Errorf("unknown row %q/%d", promptID, sample)
	}
	i := p*samplesPerPrompt + int(sample)
	if i >= d.rows {
		return 0, fmt.Errorf("unknown row %q/%d", promptID, sample)
	}
	return i, nil
}

// readResults reads a rewards file, Parquet or JSON lines, into rows
// placed by key, whatever order it was written in.
func readResults(d *dataset, path string) ([]result, error) {
	if len(path) > 6 && path[len(path)-6:] == ".jsonl" {
		return readJSONL(d, path)
	}
	return readParquet(d, path)
}

func put(rs []result, i int, r result) error {
	if rs[i].seen {
		return fmt.Errorf("row %d written twice", i)
	}
	r.seen = true
	rs[i] = r
	return nil
}

type strColumn interface {
	Value(int) string
	IsNull(int) bool
}

func readParquet(d *dataset, path string) ([]result, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pf, err := tables.OpenFile(f, size, path, &tables.ReadOptions{BatchRows: 65536})
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	rs := make([]result, d.rows)
	for rec, err := range pf.Records(context.Background()) {
		if err != nil {
			return nil, err
		}
		col := func(name string) (arrow.Array, error) {
			ix := rec.Schema().FieldIndices(name)
			if len(ix) == 0 {
				return nil, fmt.Errorf("%s: no column %q", path, name)
			}
			return rec.Column(ix[0]), nil
		}
		var cols [7]arrow.Array
		for k, name := range []string{"prompt_id", "sample_index", "status", "r_correct", "r_format", "r_length", "total"} {
			if cols[k], err = col(name); err != nil {
				return nil, err
			}
		}
		pid, ok1 := cols[0].(strColumn)
		status, ok2 := cols[2].(strColumn)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: prompt_id is %s, status %s: want strings", path, cols[0].DataType(), cols[2].DataType())
		}
		var floats [4]*array.Float64
		for k := range floats {
			a, ok := cols[3+k].(*array.Float64)
			if !ok {
				return nil, fmt.Errorf("%s: column %d is %s, want double", path, 3+k, cols[3+k].DataType())
			}
			floats[k] = a
		}
		num := func(a *array.Float64, i int) float64 {
			if a.IsNull(i) {
				return math.NaN()
			}
			return a.Value(i)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var sample int64
			switch a := cols[1].(type) {
			case *array.Int32:
				sample = int64(a.Value(i))
			case *array.Int64:
				sample = a.Value(i)
			default:
				return nil, fmt.Errorf("%s: sample_index is %s", path, a.DataType())
			}
			row, err := d.rowOf(pid.Value(i), sample)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			r := result{status: status.Value(i), correct: num(floats[0], i), format: num(floats[1], i),
				length: num(floats[2], i), total: num(floats[3], i)}
			if err := put(rs, row, r); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return rs, nil
}

type resultJSON struct {
	PromptID    string   `json:"prompt_id"`
	SampleIndex int64    `json:"sample_index"`
	Status      string   `json:"status"`
	Correct     *float64 `json:"r_correct"`
	Format      *float64 `json:"r_format"`
	Length      *float64 `json:"r_length"`
	Total       *float64 `json:"total"`
}

func readJSONL(d *dataset, path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs := make([]result, d.rows)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	num := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	for line := 1; sc.Scan(); line++ {
		var j resultJSON
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		row, err := d.rowOf(j.PromptID, j.SampleIndex)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		r := result{status: j.Status, correct: num(j.Correct), format: num(j.Format), length: num(j.Length), total: num(j.Total)}
		if err := put(rs, row, r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return rs, sc.Err()
}

// diff lists up to max rows where b differs from a, and how many do.
func diff(d *dataset, a, b []result, max int) (n int, first []string) {
	for i := range a {
		if a[i].equal(b[i]) {
			continue
		}
		n++
		if len(first) < max {
			first = append(first, fmt.Sprintf("row %d (prompt %d, sample %d): %v ≠ %v", i, i/samplesPerPrompt, i%samplesPerPrompt, a[i], b[i]))
		}
	}
	return n, first
}
