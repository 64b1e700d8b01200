package kind_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// fake is a kind for the registry's own tests.
type fake struct {
	name  string
	slots []string
}

func (f fake) Name() string    { return f.name }
func (f fake) Slots() []string { return f.slots }
func (f fake) New() kind.Stage { return nil }

func TestHintGroupsKindsBySlot(t *testing.T) {
	all := pipeline.SlotNames()
	r := kind.Registry{Kinds: []kind.Kind{
		fake{"standin", all}, kind.Command, fake{"dataset", []string{"sample"}}, fake{"cel", []string{"reward"}},
		fake{"rollout", []string{"generate"}}, fake{"grpo", []string{"train"}}, fake{"external", []string{"train"}},
	}}
	want := "use standin, command, (sample) dataset, (reward) cel, (generate) rollout or (train) grpo or external"
	if got := r.Hint(); got != want {
		t.Errorf("Hint() = %q\nwant      %q", got, want)
	}
	if _, ok := r.Lookup("grpo"); !ok {
		t.Error("Lookup(grpo) found nothing")
	}
	if _, ok := r.Lookup("python"); ok {
		t.Error("Lookup(python) found a kind")
	}
	if got := (&kind.Registry{}).Hint(); !strings.Contains(got, "no stage kinds") {
		t.Errorf("empty registry hint %q", got)
	}
}

// checker records what a stage's checks report.
type checker struct {
	slot string
	set  map[string]bool
	errs []string
}

func (c *checker) Slot() string        { return c.slot }
func (c *checker) Set(key string) bool { return c.set[key] }
func (c *checker) File() kind.File     { return kind.File{} }
func (c *checker) Path(key string) string {
	if key == "" {
		return "stages." + c.slot
	}
	return "stages." + c.slot + "." + key
}
func (c *checker) Fail(key, hint, format string, a ...any) {
	c.errs = append(c.errs, key+"|"+hint+"|"+fmt.Sprintf(format, a...))
}

func TestCommandChecksOutputsAndPlaceholders(t *testing.T) {
	s := kind.Command.New().(*kind.CommandStage)
	s.Command = []string{"train", "{{inputs.policy}}", "{{outputs.adapter}}", "{{params.lr}}"}
	s.Outputs = []kind.Output{{Name: "adapter"}}
	c := &checker{slot: pipeline.SlotTrain}
	s.Check(c)
	want := []string{
		`outputs|add dir: true|stages.train: output "adapter" is a directory (the adapter's files)`,
		`outputs|add {name: metrics, file: ...}|stages.train: the loop needs output "metrics" from the train stage; it is not declared`,
		`command[1]|set initial_policy, or pass the policy another way|stages.train.command[1]: {{inputs.policy}}: the first iteration has no policy input (the base model), so the placeholder cannot be filled`,
		`command[3]|params: iteration|stages.train.command[3]: {{params.lr}}: the train stage has no param "lr"`,
	}
	if strings.Join(c.errs, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(c.errs, "\n"), strings.Join(want, "\n"))
	}
}

func TestCommandTaskRedactsSecretsFromItsVersion(t *testing.T) {
	build := func(token string) *pipeline.Task {
		s := &kind.CommandStage{Command: []string{"r"}, Environment: map[string]string{"HF_TOKEN": token, "MODE": "x"}}
		task, err := s.Task(kind.Build{Slot: pipeline.SlotReward, Env: "reward"})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	a, b := build("k1"), build("k2")
	if a.Version != b.Version {
		t.Errorf("the version changed with a secret: %s vs %s", a.Version, b.Version)
	}
	if got := strings.Join(a.Command, " "); got != "env HF_TOKEN=k1 MODE=x r" {
		t.Errorf("argv = %q", got)
	}
}

// A command's rewards table that leaves nothing to train on — no row
// scored, some totals NaN or infinite — fails its output check, as the
// cel reward stage fails; a table with one finite row passes.
func TestCommandRewardsCheckRefusesNoFiniteReward(t *testing.T) {
	s := &kind.CommandStage{Command: []string{"score"}, Outputs: []kind.Output{{Name: pipeline.OutRewards, File: "rewards.parquet"}}}
	task, err := s.Task(kind.Build{Slot: pipeline.SlotReward, Env: "reward"})
	if err != nil {
		t.Fatal(err)
	}
	check := task.Outputs[0].Check
	skipped := tables.Reward{PromptID: "p0", SampleIndex: 2, Status: "skipped: timeout", Total: math.NaN()}
	tests := []struct {
		name string
		rows []tables.Reward
		want string // "" for none
	}{
		{name: "all +Inf", rows: []tables.Reward{
			{PromptID: "p0", Status: tables.StatusOK, Total: math.Inf(1)},
			{PromptID: "p0", SampleIndex: 1, Status: tables.StatusOK, Total: math.Inf(1)}, skipped},
			want: "no sample has a finite reward (2 of 2 are NaN or infinite; the first, prompt p0 sample 0: total: the value is +Inf): make every component and the total finite on every row, e.g. guard divisions and logarithms in the reward spec, and check the scores of its judges"},
		{name: "NaN said nonfinite", rows: []tables.Reward{
			{PromptID: "p0", Status: tables.RewardNonfinite, Total: math.NaN(), Error: ptr("score: the value is NaN")},
			{PromptID: "p0", SampleIndex: 1, Status: "error", Total: math.NaN(), Error: ptr("timeout")}},
			want: "no sample has a finite reward (1 of 2 are NaN or infinite; the first, prompt p0 sample 0: score: the value is NaN): make every component and the total finite on every row, e.g. guard divisions and logarithms in the reward spec, and check the scores of its judges"},
		{name: "one finite row", rows: []tables.Reward{
			{PromptID: "p0", Status: tables.StatusOK, Total: math.Inf(-1)},
			{PromptID: "p0", SampleIndex: 1, Status: tables.StatusOK, Total: 0.5}}},
		{name: "only errors", rows: []tables.Reward{{PromptID: "p0", Status: "error", Total: math.NaN()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rewards.parquet")
			if err := tables.WriteFile(path, tables.Rewards, tt.rows, nil); err != nil {
				t.Fatal(err)
			}
			err := check(path)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("check: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want || !errors.Is(err, tables.ErrNoFiniteReward)):
				t.Errorf("check = %v\nwant the ErrNoFiniteReward %s", err, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestOf: a kind made by Of has its name and slots, a fresh zero stage
// from each New, and slots a caller cannot change; InSection adds only
// the section.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		k       kind.Kind
		slots   []string
		section string // "" for not Sectioned
	}{
		{"every slot", kind.Of[kind.CommandStage]("c", pipeline.SlotNames()...), pipeline.SlotNames(), ""},
		{"one slot", kind.Of[kind.CommandStage]("c", pipeline.SlotTrain), []string{pipeline.SlotTrain}, ""},
		{"in a section", kind.InSection(kind.Of[kind.CommandStage]("c", pipeline.SlotTrain), "trainer"), []string{pipeline.SlotTrain}, "trainer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.k.Name(); got != "c" {
				t.Errorf("Name() = %q, want c", got)
			}
			got := tc.k.Slots()
			if strings.Join(got, ",") != strings.Join(tc.slots, ",") {
				t.Errorf("Slots() = %v, want %v", got, tc.slots)
			}
			got[0] = "changed"
			if again := tc.k.Slots(); again[0] != tc.slots[0] {
				t.Errorf("Slots()[0] = %q after a caller changed its copy, want %q", again[0], tc.slots[0])
			}
			a, b := tc.k.New().(*kind.CommandStage), tc.k.New().(*kind.CommandStage)
			if a == b || len(a.Command) != 0 {
				t.Errorf("New() = %p %+v and %p: want two distinct zero stages", a, *a, b)
			}
			s, ok := tc.k.(kind.Sectioned)
			if ok != (tc.section != "") || ok && s.Section() != tc.section {
				t.Errorf("Sectioned = %v, want section %q", ok, tc.section)
			}
		})
	}
}
