package kind

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Command is the kind of a stage that is an external command: the engine
// runs its argv with the inputs, outputs and params filled in
// ({{inputs.NAME}}, …) and checks the tables it writes (docs/PIPELINE.md).
var Command = Of[CommandStage]("command", pipeline.SlotNames()...)

// CommandStage is a command stage's keys.
type CommandStage struct {
	Command      []string          `yaml:"command,omitempty"`
	Outputs      []Output          `yaml:"outputs,omitempty"`
	Environment  map[string]string `yaml:"environment,omitempty"`
	IgnoreInputs []string          `yaml:"ignore_inputs,omitempty"`
}

// Output declares a file (or directory) a command stage writes.
type Output struct {
	Name string `yaml:"name"`
	File string `yaml:"file,omitempty"`
	Dir  bool   `yaml:"dir,omitempty"`
}

var (
	// ReEnvName matches an environment variable's name.
	ReEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	rePlace   = regexp.MustCompile(`\{\{\s*([a-z_]+)(?:\.([A-Za-z0-9_-]+))?\s*\}\}`)
)

// CheckEnvironment reports variable names that are not names.
func CheckEnvironment(c Checker, env map[string]string) {
	for key := range env {
		if !ReEnvName.MatchString(key) {
			c.Fail("environment."+key, "", "%s: %q is not a variable name", c.Path("environment"), key)
		}
	}
}

// Check checks the argv, the outputs the loop needs and the placeholders.
func (s *CommandStage) Check(c Checker) {
	name := c.Slot()
	slot, _ := pipeline.SlotByName(name)
	if len(s.Command) == 0 {
		c.Fail("", `e.g. command: [python, gen.py, "{{inputs.prompts}}", "{{outputs.trajectories}}"]`, "%s: a command stage needs command (an argv list)", c.Path(""))
	}
	if len(s.Environment) > 0 && len(s.Command) > 0 && strings.Contains(s.Command[0], "=") {
		c.Fail("command[0]", "name the program without '='", "%s: %q cannot follow environment variables", c.Path("command[0]"), s.Command[0])
	}
	outs := map[string]Output{}
	for i, o := range s.Outputs {
		op := fmt.Sprintf("outputs[%d]", i)
		switch {
		case o.Name == "":
			c.Fail(op, "", "%s: an output needs a name", c.Path(op))
		case outs[o.Name].Name != "":
			c.Fail(op, "", "%s: output %q is declared twice", c.Path(op), o.Name)
		case strings.Contains(o.File, "/") || o.File == "." || o.File == "..":
			c.Fail(op+".file", "", "%s: %q must be a plain file name", c.Path(op+".file"), o.File)
		}
		if o.Name != "" {
			outs[o.Name] = o
		}
	}
	for _, need := range slot.Outputs {
		o, ok := outs[need]
		switch {
		case !ok:
			c.Fail("outputs", fmt.Sprintf("add {name: %s, file: ...}", need), "%s: the loop needs output %q from the %s stage; it is not declared", c.Path(""), need, name)
		case need == pipeline.OutAdapter && !o.Dir:
			c.Fail("outputs", "add dir: true", "%s: output %q is a directory (the adapter's files)", c.Path(""), need)
		}
	}
	CheckEnvironment(c, s.Environment)
	for _, in := range s.IgnoreInputs {
		if !slices.Contains(slot.Inputs, in) {
			c.Fail("ignore_inputs", "inputs: "+strings.Join(slot.Inputs, ", "), "%s: the %s stage has no input %q", c.Path("ignore_inputs"), name, in)
		}
	}
	for i, arg := range s.Command {
		ap := fmt.Sprintf("command[%d]", i)
		for _, m := range rePlace.FindAllStringSubmatch(arg, -1) {
			kind, ref := m[1], m[2]
			switch {
			case kind == "inputs" && slices.Contains(slot.Inputs, ref):
				if ref == "policy" && !c.File().InitialPolicy {
					c.Fail(ap, "set initial_policy, or pass the policy another way",
						"%s: %s: the first iteration has no policy input (the base model), so the placeholder cannot be filled", c.Path(ap), m[0])
				}
			case kind == "inputs":
				c.Fail(ap, "inputs: "+strings.Join(slot.Inputs, ", "), "%s: %s: the %s stage has no input %q", c.Path(ap), m[0], name, ref)
			case kind == "outputs" && outs[ref].Name != "":
			case kind == "outputs":
				c.Fail(ap, "declare it under outputs", "%s: %s: no output %q is declared", c.Path(ap), m[0], ref)
			case kind == "params" && slices.Contains(slot.Params, ref):
			case kind == "params":
				c.Fail(ap, "params: "+strings.Join(slot.Params, ", "), "%s: %s: the %s stage has no param %q", c.Path(ap), m[0], name, ref)
			case ref == "" && (kind == "attempt" || kind == "seed" || kind == "iteration" || kind == "workdir"):
			default:
				c.Fail(ap, "known: inputs.NAME, outputs.NAME, params.NAME, attempt, seed, iteration, workdir", "%s: unknown placeholder %s", c.Path(ap), m[0])
			}
		}
	}
}

// Task builds the command's task. The engine's cache key does not see the
// argv, so the task's version is a digest of everything that shapes the
// command's results: its version, argv, outputs and environment (secret
// values redacted, so rotating a key keeps the cache).
func (s *CommandStage) Task(b Build) (*pipeline.Task, error) {
	t := &pipeline.Task{Name: b.Slot, Env: b.Env, IgnoreInputs: s.IgnoreInputs}
	env := map[string]string{}
	for k, v := range s.Environment {
		if pipeline.IsSecret(k) {
			v = pipeline.Redacted
		}
		env[k] = v
	}
	var err error
	if t.Version, err = pipeline.CodeDigest("command", struct {
		Version     string            `json:"version"`
		Command     []string          `json:"command"`
		Outputs     []Output          `json:"outputs"`
		Environment map[string]string `json:"environment"`
	}{b.Version, s.Command, s.Outputs, env}); err != nil {
		return nil, err
	}

	argv := s.Command
	if len(s.Environment) > 0 {
		// env(1) sets the variables and execs the command, so they never
		// sit in a process listing longer than that exec.
		keys := make([]string, 0, len(s.Environment))
		for k := range s.Environment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		argv = []string{"env"}
		for _, k := range keys {
			argv = append(argv, k+"="+s.Environment[k])
		}
		argv = append(argv, s.Command...)
	}
	t.Command = argv
	for _, o := range s.Outputs {
		out := pipeline.Output{Name: o.Name, File: o.File, Dir: o.Dir}
		if !o.Dir {
			out.Check = tableCheck(o.Name)
		}
		t.Outputs = append(t.Outputs, out)
	}
	return t, nil
}

// tableCheck validates the tables the loop passes between stages.
func tableCheck(output string) func(string) error {
	switch output {
	case pipeline.OutPrompts:
		return checkTable(tables.Prompts)
	case pipeline.OutTrajectories:
		return checkTable(tables.Trajectories)
	case pipeline.OutRewards:
		return checkRewards
	}
	return nil
}

// checkRewards checks a command's rewards table, and that it leaves
// something to train on: when no row is scored and some rewards are NaN
// or infinite, the check fails (tables.CheckFinite), as the reward stage
// of kind cel does.
func checkRewards(path string) error {
	rows, err := tables.ReadFile(path, tables.Rewards)
	if err != nil {
		return err
	}
	return tables.CheckFinite(rows)
}

func checkTable[T any](t *tables.Table[T]) func(string) error {
	return func(path string) error { return tables.CheckFile(path, t) }
}
