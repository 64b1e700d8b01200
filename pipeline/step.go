package pipeline

import (
	"context"
	"fmt"
	"slices"
)

// A Step is a task of the RL iteration beyond the four slots: the
// advantages a trainer trains on, the training health, the evaluation of
// a checkpoint, or a step of a plug-in's own. Loop wires it from what it
// declares: each input is a named output of a slot or of an earlier
// step, and a step placed before a slot hands its outputs to that slot's
// task as inputs of the same names (the train task reads "advantages").
// A stage kind or the registry adds steps (kind.Stepped,
// kind.Registry.Steps); the four slots stay.
type Step struct {
	// Name names the step's calls ("advantages", "health",
	// "eval-generate-start"): it labels events, the cache key's caller
	// and the iteration's task metrics, and places the step in
	// TaskOrder. It is unique in a loop and no slot's name.
	Name string
	// Task is what the step runs; two steps may share one (the eval
	// steps of the starting policy and of a checkpoint).
	Task *Task
	// After is the slot or step the step follows in TaskOrder and in the
	// order Loop starts the calls (a step's inputs wait for their
	// producers whatever the order).
	After string
	// Before, when set, is a slot after After that the step feeds: the
	// slot's task gets each of Outputs as an input of the same name, and
	// must not write the same files (the plan drops them from the task).
	Before string
	// Inputs are the task's inputs and where each comes from.
	Inputs []StepInput
	// Outputs are the outputs of Task the step declares: what later steps
	// and the slot in Before may read.
	Outputs []string
	// Params are the call's parameters in iteration n; nil is
	// {"iteration": n}.
	Params func(n int) map[string]int
	// When says whether the step runs in iteration n of a loop whose last
	// iteration is last; nil runs it in every iteration. A step whose
	// input comes from a step that did not run is skipped too.
	When func(n, last int) bool
	// Dir is where the call's outputs go in iteration n (a path on the
	// run branch, runs' builders); nil is the iteration's directory.
	Dir func(n int) string
}

// A StepInput is where an input of a step's task comes from: output
// Output of the slot or step From, the starting policy (FromStart), or a
// fixed artifact (From "").
type StepInput struct {
	// Name is the input's name as the task reads it.
	Name string
	// From is a slot's or an earlier step's name, or FromStart.
	From string
	// Output is the output of From that is read.
	Output string
	// Artifact is the input when From is "" (an eval set in the store).
	Artifact Artifact
}

// FromStart is the source of the policy the run starts from: the
// initial policy, or no input at all when the run starts from the base
// model (LoopConfig.InitialPolicy nil).
const FromStart = "start"

// From is the input name of output output of from (same name).
func From(from, output string) StepInput {
	return StepInput{Name: output, From: from, Output: output}
}

// params are s's call parameters in iteration n.
func (s Step) params(n int) map[string]int {
	if s.Params == nil {
		return map[string]int{"iteration": n}
	}
	return s.Params(n)
}

// TaskOrder is the order in which the task calls of an iteration with
// these steps are listed (and started): each slot, followed by the steps
// that come after it, each step followed by the steps that come after
// it, in the steps' order. A step whose After names nothing listed is
// left out (CheckSteps reports it).
func TaskOrder(steps []Step) []string {
	var out []string
	var follow func(name string)
	follow = func(name string) {
		out = append(out, name)
		for _, s := range steps {
			if s.After == name && !slices.Contains(out, s.Name) {
				follow(s.Name)
			}
		}
	}
	for _, s := range Slots {
		follow(s.Name)
	}
	return out
}

// TaskRank is a task name's place in order (len(order) when absent).
func TaskRank(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}

// CheckSteps checks that steps fit together around the slots: names are
// unique and not slots', each step follows a slot or a step, its inputs
// come from slots or steps listed before it (with outputs they declare),
// a step that feeds a slot comes before it, and that slot's task (in st)
// writes none of the step's files. Loop calls it; a plan calls it before
// any task runs.
func CheckSteps(st Stages) error {
	order := TaskOrder(st.Steps)
	outputs := map[string][]string{FromStart: {"policy"}}
	for _, s := range Slots {
		outputs[s.Name] = s.Outputs
	}
	byName := map[string]Step{}
	for _, s := range st.Steps {
		switch _, slot := SlotByName(s.Name); {
		case s.Name == "" || s.Task == nil:
			return fmt.Errorf("%w: a step needs a name and a task (step %q)", ErrConfig, s.Name)
		case slot || s.Name == FromStart:
			return fmt.Errorf("%w: step %s: the name is a slot's; name the step otherwise", ErrConfig, s.Name)
		case byName[s.Name].Name != "":
			return fmt.Errorf("%w: two steps are named %s; name each step once", ErrConfig, s.Name)
		case !slices.Contains(order, s.Name):
			return fmt.Errorf("%w: step %s comes after %q, which is no slot or step; set After to one of %v", ErrConfig, s.Name, s.After, order)
		}
		byName[s.Name] = s
		for _, o := range s.Outputs {
			if !slices.ContainsFunc(s.Task.Outputs, func(x Output) bool { return x.Name == o }) {
				return fmt.Errorf("%w: step %s declares output %s, which its task %s does not write", ErrConfig, s.Name, o, s.Task.Name)
			}
		}
		outputs[s.Name] = s.Outputs
	}
	for _, s := range st.Steps {
		at := TaskRank(order, s.Name)
		for _, in := range s.Inputs {
			if in.From == "" {
				continue
			}
			if in.From != FromStart && TaskRank(order, in.From) >= at {
				return fmt.Errorf("%w: step %s reads its input %s from %s, which does not run before it; place the step after %s", ErrConfig, s.Name, in.Name, in.From, in.From)
			}
			if !slices.Contains(outputs[in.From], in.Output) {
				return fmt.Errorf("%w: step %s reads its input %s from output %s of %s, which declares only %v", ErrConfig, s.Name, in.Name, in.Output, in.From, outputs[in.From])
			}
		}
		if s.Before == "" {
			continue
		}
		if _, ok := SlotByName(s.Before); !ok || TaskRank(order, s.Before) < at {
			return fmt.Errorf("%w: step %s feeds %s, which is no slot after it; set Before to a later slot", ErrConfig, s.Name, s.Before)
		}
		if f := clash(s.Task, st.slot(s.Before)); f != "" {
			return fmt.Errorf("%w: the %s task and the %s task both write %s; the %s task reads the step's output as its input", ErrConfig, s.Name, s.Before, f, s.Before)
		}
	}
	return nil
}

// slot is the task that fills slot (nil for another name).
func (s Stages) slot(name string) *Task {
	switch name {
	case SlotSample:
		return s.Sample
	case SlotGenerate:
		return s.Generate
	case SlotReward:
		return s.Reward
	case SlotTrain:
		return s.Train
	}
	return nil
}

// Feeding is task as it runs in a loop with steps that feed it: a copy
// without the outputs those steps declare, which they write (a trainer
// given the "advantages" input trains on those rows and writes none of
// its own). It returns task itself when no step feeds slot.
func Feeding(task *Task, slot string, steps []Step) *Task {
	var drop []string
	for _, s := range steps {
		if s.Before == slot {
			drop = append(drop, s.Outputs...)
		}
	}
	if len(drop) == 0 {
		return task
	}
	t := *task
	t.Outputs = nil
	for _, o := range task.Outputs {
		if !slices.Contains(drop, o.Name) {
			t.Outputs = append(t.Outputs, o)
		}
	}
	return &t
}

// clash is a file that both a and b declare as an output ("" for none).
func clash(a, b *Task) string {
	for _, x := range a.Outputs {
		for _, y := range b.Outputs {
			if x.file() == y.file() {
				return x.file()
			}
		}
	}
	return ""
}

// upstream is what a step's inputs are read from: the outputs of the
// iteration's nodes by slot or step name, and the starting policy.
type upstream struct {
	nodes map[string]*Node
	start *Artifact
}

// input resolves in; false when it is absent (the base model's policy)
// or its producer did not run in this iteration.
func (u upstream) input(in StepInput) (Artifact, bool) {
	switch in.From {
	case "":
		return in.Artifact, true
	case FromStart:
		if u.start == nil {
			return Artifact{}, false
		}
		return *u.start, true
	}
	n, ok := u.nodes[in.From]
	if !ok {
		return Artifact{}, false
	}
	return n.Output(in.Output), true
}

// goStep starts s's call in iteration n of it, unless its schedule or a
// producer that did not run skips it (nil then). The node is recorded
// under the step's name for later steps.
func (u upstream) goStep(ctx context.Context, it *Iteration, s Step, n int) *Node {
	in := map[string]Artifact{}
	for _, x := range s.Inputs {
		a, ok := u.input(x)
		if !ok && x.From != FromStart {
			return nil
		}
		if ok {
			in[x.Name] = a
		}
	}
	c := Call{Name: s.Name, Inputs: in, Params: s.params(n)}
	if s.Dir != nil {
		c.Dir = s.Dir(n)
	}
	node := it.Go(ctx, s.Task, c)
	u.nodes[s.Name] = node
	return node
}

// Step is the step named name (nil without one).
func (s Stages) Step(name string) *Step {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i]
		}
	}
	return nil
}
