package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// MetaCorrect is the key-value metadata entry of a rewards file that
// holds its spec's declared correctness rule as JSON (Correctness's
// fields). A file of a spec without a `correct:` key has none: its rule
// is DefaultCorrectness of its component columns.
const MetaCorrect = "rlpipe.correct"

// CorrectComponent is the reward component whose presence in a spec makes
// it the default judge of correctness (DefaultCorrectness).
const CorrectComponent = "correct"

// Correctness is the one rule that decides whether a scored sample is
// correct: evaluation counts its samples for pass@k, maj@k and pass^k
// with it, and the health table splits groups into solved-all, solved-none
// and mixed with it. A reward spec declares it (its `correct:` key, see
// docs/REWARDS.md); without the key it is DefaultCorrectness of the
// spec's components.
//
// With a Component the value of that component decides: the sample is
// correct when the row has it (a null component is not correct) and it is
// ≥ Threshold, or > Threshold when Above. Without one the total decides,
// the same way.
type Correctness struct {
	Component string  `json:"component,omitempty"`
	Threshold float64 `json:"threshold"`
	Above     bool    `json:"above,omitempty"`
}

// DefaultCorrectness is the rule of a spec that declares none: its
// component "correct" at least 0.5 when it has one, else a total above 0.
// These are the rules evaluation has always used.
func DefaultCorrectness(components []string) Correctness {
	if slices.Contains(components, CorrectComponent) {
		return Correctness{Component: CorrectComponent, Threshold: 0.5}
	}
	return Correctness{Threshold: 0, Above: true}
}

// Correct reports whether a reward row is a correct sample. It does not
// look at the row's status: a row that is not Scored is no sample of the
// metrics at all, which the caller decides.
func (c Correctness) Correct(r Reward) bool {
	v := r.Total
	if c.Component != "" {
		var ok bool
		if v, ok = r.Components[c.Component]; !ok {
			return false
		}
	}
	if !Finite(v) {
		return false
	}
	if c.Above {
		return v > c.Threshold
	}
	return v >= c.Threshold
}

// String writes the rule as a comparison, e.g. "correct >= 0.5" or
// "total > 0".
func (c Correctness) String() string {
	name, op := c.Component, ">="
	if name == "" {
		name = "total"
	}
	if c.Above {
		op = ">"
	}
	return fmt.Sprintf("%s %s %s", name, op, strconv.FormatFloat(c.Threshold, 'g', -1, 64))
}

// Meta is the rule as MetaCorrect's value.
func (c Correctness) Meta() string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("tables: encode correctness rule: %v", err)) // a string, a float and a bool always encode
	}
	return string(b)
}

// CorrectnessOf is the correctness rule of a rewards file: its
// MetaCorrect entry, else DefaultCorrectness of its component columns.
func CorrectnessOf(f *File) (Correctness, error) {
	if v, ok := f.Metadata(MetaCorrect); ok {
		var c Correctness
		if err := json.Unmarshal([]byte(v), &c); err != nil || !Finite(c.Threshold) {
			return Correctness{}, fmt.Errorf("%s: metadata %s = %q is not a correctness rule: %w", f.Name(), MetaCorrect, v, ErrBadValue)
		}
		return c, nil
	}
	var names []string
	for _, fd := range f.Schema().Fields() {
		if n, ok := Rewards.extraName(fd.Name); ok {
			names = append(names, n)
		}
	}
	return DefaultCorrectness(names), nil
}

// ReadRewards reads every row of a rewards file and its correctness
// rule (CorrectnessOf).
func ReadRewards(r io.ReaderAt, size int64, name string) ([]Reward, Correctness, error) {
	rd, err := NewReader(r, size, name, Rewards, nil)
	if err != nil {
		return nil, Correctness{}, err
	}
	defer rd.Close()
	c, err := CorrectnessOf(rd.File())
	if err != nil {
		return nil, Correctness{}, err
	}
	out := make([]Reward, 0, min(rd.NumRows(), 1<<16))
	for row, err := range rd.Rows(context.Background()) {
		if err != nil {
			return nil, Correctness{}, err
		}
		out = append(out, row)
	}
	return out, c, nil
}

// ReadRewardsFile is ReadRewards of the local file at path, named by its
// base name in errors.
func ReadRewardsFile(path string) ([]Reward, Correctness, error) {
	f, size, name, err := openLocal(path)
	if err != nil {
		return nil, Correctness{}, err
	}
	defer f.Close()
	return ReadRewards(f, size, name)
}
