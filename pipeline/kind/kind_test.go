package kind_test

import (
	"fmt"
	"strings"
	"testing"

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
