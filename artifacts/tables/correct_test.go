package tables_test

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func row(total float64, comps map[string]float64) tables.Reward {
	return tables.Reward{PromptID: "p", Total: total, Components: comps, Status: tables.StatusOK}
}

// TestCorrectnessWhereOldRulesDisagreed runs the one rule on the rows
// where evaluation's old rule (component "correct" ≥ 0.5 when the spec
// declares it, else total > 0) and the health table's old rule ("correct"
// when some row has it, else the mean of the correct*/accuracy* components
// against PassThreshold, else total > 0; the total again on a row lacking
// "correct") gave different answers, and on rows where they agreed.
func TestCorrectnessWhereOldRulesDisagreed(t *testing.T) {
	tests := []struct {
		name       string
		components []string            // the spec's, for the default rule
		rule       *tables.Correctness // a declared rule, or nil
		row        tables.Reward
		oldEval    bool // what evaluation said
		oldHealth  bool // what the health table said
		want       bool
	}{
		{name: "accuracy passes, total 0 (evaluation's default wins)", components: []string{"accuracy", "length"},
			row: row(0, map[string]float64{"accuracy": 1, "length": -1}), oldEval: false, oldHealth: true, want: false},
		{name: "correct_answer fails, total positive", components: []string{"correct_answer", "format"},
			row: row(0.2, map[string]float64{"correct_answer": 0, "format": 1}), oldEval: true, oldHealth: false, want: true},
		{name: "correct declared, null on this row, total positive", components: []string{"correct", "bonus"},
			row: row(1, map[string]float64{"bonus": 1}), oldEval: false, oldHealth: true, want: false},
		{name: "declare accuracy to count it", components: []string{"accuracy", "length"},
			rule: &tables.Correctness{Component: "accuracy", Threshold: 0.5},
			row:  row(0, map[string]float64{"accuracy": 1, "length": -1}), oldEval: false, oldHealth: true, want: true},
		{name: "correct passes", components: []string{"correct"},
			row: row(1, map[string]float64{"correct": 1}), oldEval: true, oldHealth: true, want: true},
		{name: "correct at the threshold", components: []string{"correct"},
			row: row(0.5, map[string]float64{"correct": 0.5}), oldEval: true, oldHealth: true, want: true},
		{name: "correct just below", components: []string{"correct", "format"},
			row: row(1.49, map[string]float64{"correct": 0.49, "format": 1}), oldEval: false, oldHealth: false, want: false},
		{name: "no correct, total 0", components: []string{"format"},
			row: row(0, map[string]float64{"format": 0}), oldEval: false, oldHealth: false, want: false},
		{name: "total at least 1", components: []string{"a"}, rule: &tables.Correctness{Threshold: 1},
			row: row(1, map[string]float64{"a": 1}), oldEval: true, oldHealth: true, want: true},
		{name: "total above 1", components: []string{"a"}, rule: &tables.Correctness{Threshold: 1, Above: true},
			row: row(1, map[string]float64{"a": 1}), oldEval: true, oldHealth: true, want: false},
		{name: "NaN component", components: []string{"correct"},
			row: row(1, map[string]float64{"correct": math.NaN()}), oldEval: false, oldHealth: true, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rule := tables.DefaultCorrectness(tc.components)
			if tc.rule != nil {
				rule = *tc.rule
			}
			if got := rule.Correct(tc.row); got != tc.want {
				t.Errorf("%s on %+v: %v, want %v (evaluation said %v, health %v)", rule, tc.row, got, tc.want, tc.oldEval, tc.oldHealth)
			}
		})
	}
}

func TestCorrectnessString(t *testing.T) {
	for rule, want := range map[tables.Correctness]string{
		tables.DefaultCorrectness([]string{"correct", "format"}): "correct >= 0.5",
		tables.DefaultCorrectness([]string{"format"}):            "total > 0",
		{Component: "accuracy", Threshold: 0.75}:                 "accuracy >= 0.75",
		{Threshold: 1}:                                           "total >= 1",
	} {
		if got := rule.String(); got != want {
			t.Errorf("%+v: %q, want %q", rule, got, want)
		}
	}
}

// TestCorrectnessOfFile: a rewards file carries a declared rule in its
// metadata; without one its rule is the default of its component columns,
// even a column null on every row.
func TestCorrectnessOfFile(t *testing.T) {
	declared := tables.Correctness{Component: "accuracy", Threshold: 0.9}
	tests := []struct {
		name       string
		components []string
		meta       string // MetaCorrect, "" for none
		want       tables.Correctness
		wantErr    error
	}{
		{name: "default with correct", components: []string{"correct", "format"}, want: tables.Correctness{Component: "correct", Threshold: 0.5}},
		{name: "default without correct", components: []string{"format"}, want: tables.Correctness{Above: true}},
		{name: "declared", components: []string{"accuracy"}, meta: declared.Meta(), want: declared},
		{name: "bad metadata", components: []string{"accuracy"}, meta: `{"threshold": "high"}`, wantErr: tables.ErrBadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := tables.RewardsWith(tc.components...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.meta != "" {
				tb = tb.WithMetadata(tables.MetaCorrect, tc.meta)
			}
			// Every component null: the rule still comes from the columns.
			rows := []tables.Reward{{PromptID: "p", Total: 1, Status: tables.StatusOK, SpecDigest: "sha256:x"}}
			path := filepath.Join(t.TempDir(), "rewards.parquet")
			if err := tables.WriteFile(path, tb, rows, nil); err != nil {
				t.Fatal(err)
			}
			got, rule, err := tables.ReadRewardsFile(path)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || rule != tc.want {
				t.Errorf("%d rows, rule %+v; want 1, %+v", len(got), rule, tc.want)
			}
		})
	}
}
