package pipeline_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// testStep is a step named name after after whose task writes out.file.
func testStep(name, after string, in ...pipeline.StepInput) pipeline.Step {
	return pipeline.Step{Name: name, After: after, Inputs: in, Outputs: []string{"out"},
		Task: &pipeline.Task{Name: name, Version: "1", Outputs: []pipeline.Output{{Name: "out", File: name + ".out"}}}}
}

// TestCheckStepsRefusesWhatCannotBeWired: each way a step fails to fit
// the loop is an ErrConfig naming the step and what to change.
func TestCheckStepsRefusesWhatCannotBeWired(t *testing.T) {
	fromReward := pipeline.From(pipeline.SlotReward, pipeline.OutRewards)
	clashing := testStep("adv", pipeline.SlotReward)
	clashing.Before = pipeline.SlotTrain
	clashing.Task.Outputs[0].File = "train_metrics.json"
	late := testStep("early", pipeline.SlotReward, pipeline.From("late", "out"))
	backwards := testStep("back", pipeline.SlotTrain)
	backwards.Before = pipeline.SlotReward
	undeclared := testStep("odd", pipeline.SlotReward)
	undeclared.Outputs = []string{"other"}
	for _, tc := range []struct {
		name  string
		steps []pipeline.Step
		want  string
	}{
		{"a slot's name", []pipeline.Step{testStep("reward", pipeline.SlotReward)},
			"invalid pipeline config: step reward: the name is a slot's; name the step otherwise"},
		{"twice", []pipeline.Step{testStep("a", pipeline.SlotReward), testStep("a", pipeline.SlotTrain)},
			"invalid pipeline config: two steps are named a; name each step once"},
		{"after nothing", []pipeline.Step{testStep("a", "nowhere")},
			`invalid pipeline config: step a comes after "nowhere", which is no slot or step; set After to one of [sample generate reward train]`},
		{"input from a later step", []pipeline.Step{late, testStep("late", pipeline.SlotTrain)},
			"invalid pipeline config: step early reads its input out from late, which does not run before it; place the step after late"},
		{"undeclared input", []pipeline.Step{testStep("a", pipeline.SlotReward, pipeline.From(pipeline.SlotReward, "scores"))},
			"invalid pipeline config: step a reads its input scores from output scores of reward, which declares only [rewards]"},
		{"undeclared output", []pipeline.Step{undeclared},
			"invalid pipeline config: step odd declares output other, which its task odd does not write"},
		{"feeds an earlier slot", []pipeline.Step{backwards},
			"invalid pipeline config: step back feeds reward, which is no slot after it; set Before to a later slot"},
		{"writes the fed slot's file", []pipeline.Step{clashing},
			"invalid pipeline config: the adv task and the train task both write train_metrics.json; the train task reads the step's output as its input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := standin.Stages(standin.Options{})
			st.Steps = tc.steps
			err := pipeline.CheckSteps(st)
			if !errors.Is(err, pipeline.ErrConfig) || err.Error() != tc.want {
				t.Fatalf("CheckSteps: %v\nwant %s", err, tc.want)
			}
		})
	}
	st := standin.Stages(standin.Options{})
	st.Steps = []pipeline.Step{testStep("a", pipeline.SlotReward, fromReward), testStep("b", "a", pipeline.From("a", "out"))}
	if err := pipeline.CheckSteps(st); err != nil {
		t.Errorf("a chain of steps: %v", err)
	}
}

// TestTaskOrderPlacesStepsAfterWhatTheyFollow: steps follow their After,
// in the list's order, chains kept together; no step, the four slots.
func TestTaskOrderPlacesStepsAfterWhatTheyFollow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []pipeline.Step
		want  []string
	}{
		{"none", nil, []string{"sample", "generate", "reward", "train"}},
		{"the shipped shape", append([]pipeline.Step{testStep("advantages", "reward"), testStep("health", "train")},
			pipeline.EvalSteps(pipeline.EvalConfig{}, nil, nil)...),
			[]string{"sample", "generate", "reward", "advantages", "train", "health", "eval-generate-start", "eval-start", "eval-generate", "eval"}},
		{"a chain after a step", []pipeline.Step{testStep("c", "b"), testStep("a", "reward"), testStep("b", "a")},
			[]string{"sample", "generate", "reward", "a", "b", "c", "train"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pipeline.TaskOrder(tc.steps); !slices.Equal(got, tc.want) {
				t.Errorf("TaskOrder %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFeedingDropsTheFedOutputs: a slot fed by a step loses the outputs
// the step writes; another slot's task is returned as is.
func TestFeedingDropsTheFedOutputs(t *testing.T) {
	st := standin.Stages(standin.Options{})
	s := testStep("m", pipeline.SlotReward)
	s.Before, s.Outputs, s.Task.Outputs[0].Name = pipeline.SlotTrain, []string{pipeline.OutMetrics}, pipeline.OutMetrics
	fed := pipeline.Feeding(st.Train, pipeline.SlotTrain, []pipeline.Step{s})
	if len(fed.Outputs) != 1 || fed.Outputs[0].Name != pipeline.OutAdapter || len(st.Train.Outputs) != 2 {
		t.Errorf("fed train outputs %+v (the original's %d)", fed.Outputs, len(st.Train.Outputs))
	}
	if got := pipeline.Feeding(st.Reward, pipeline.SlotReward, []pipeline.Step{s}); got != st.Reward {
		t.Errorf("a slot no step feeds got a copy")
	}
}
