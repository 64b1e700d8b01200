// Package kindtest is the conformance suite every stage kind runs: what
// the engine needs of a kind.Kind whatever it does. A kind's test gives
// one Case (the kind, the registry it is parsed with, the slot and the
// keys of a valid stage) and calls Run; the suite checks, as named
// subtests, that the kind is named and registered, fills real slots and
// decodes into a fresh value; that a file with the stage parses and
// plans into a task the loop can run (a name, a version, the slot's
// outputs) with the same version every time, changed by the stage's
// version: key; and that an unknown key and the kind in a slot it does
// not fill are refused with the file:line:column of the key.
//
// The file is configtest.Base with the case's stage in its slot and the
// case's sections appended. Test code only: it imports testing.
package kindtest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/suite"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/pipeline/kind"
)

// Case is one stage kind under test.
type Case struct {
	// Kind is the kind under test; Registry is what the file is parsed
	// with, and must hold Kind.
	Kind     kind.Kind
	Registry *kind.Registry
	// Slot is the slot the valid stage fills (one of Kind.Slots()).
	Slot string
	// Keys are the stage's keys beside kind, in YAML flow style
	// ("spec: reward.yaml, version: 2"); "" for none.
	Keys string
	// Others are the other slots' stages the stage needs, in place of
	// configtest.Base's stand-ins: a flow map by slot ("{kind: rollout,
	// env: gen, …}" for a trainer that trains the policy a rollout
	// samples from).
	Others map[string]string
	// Sections are top-level sections the stage needs, appended to the
	// file ("policy: {kind: embedded}\n"). A kind.Sectioned kind's own
	// section is not among them: the suite writes BadKey there.
	Sections string
	// BadKey is a key the kind does not take. It is written beside the
	// stage's keys, or for a kind.Sectioned kind as the only key of its
	// section appended to the file.
	BadKey string
}

// fixture is what each scenario runs on: its own subtest and the case.
type fixture struct {
	t *testing.T
	c Case
}

// Run runs the suite on c.
func Run(t *testing.T, c Case) {
	t.Helper()
	if c.Kind == nil || c.Registry == nil || c.Slot == "" || c.BadKey == "" {
		t.Fatalf("kindtest.Case needs Kind, Registry, Slot and BadKey: %+v", c)
	}
	groups := []suite.Group[fixture]{
		{Name: "Kind", Scenarios: []suite.Scenario[fixture]{
			{Name: "NamedAndRegistered", Run: namedAndRegistered},
			{Name: "FillsRealSlots", Run: fillsRealSlots},
			{Name: "NewIsFresh", Run: newIsFresh},
		}},
		{Name: "Plan", Scenarios: []suite.Scenario[fixture]{
			{Name: "TaskTheLoopCanRun", Run: taskTheLoopCanRun},
			{Name: "SameVersionsTwice", Run: sameVersionsTwice},
			{Name: "VersionKeyChangesVersion", Run: versionKeyChangesVersion},
		}},
		{Name: "Refuses", Scenarios: []suite.Scenario[fixture]{
			{Name: "UnknownKey", Run: unknownKey},
		}},
	}
	// A kind that fills every slot has no slot to be refused in.
	if len(c.Kind.Slots()) < len(pipeline.Slots) {
		groups[2].Scenarios = append(groups[2].Scenarios, suite.Scenario[fixture]{Name: "SlotItDoesNotFill", Run: slotItDoesNotFill})
	}
	suite.Run(t, groups, func(t *testing.T) fixture { return fixture{t: t, c: c} })
}

// File is the pipeline file of c: configtest.Base with c's other stages,
// the stage of c's kind in slot, extra written beside its keys, and c's
// sections.
func File(c Case, slot, extra string) string {
	keys := []string{"kind: " + c.Kind.Name()}
	for _, k := range []string{extra, c.Keys} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	stage := "  " + slot + ": {" + strings.Join(keys, ", ") + "}"
	lines := strings.Split(configtest.Base, "\n")
	for i, l := range lines {
		for name, other := range c.Others {
			if strings.HasPrefix(l, "  "+name+": {") {
				lines[i] = "  " + name + ": " + other
			}
		}
		if strings.HasPrefix(l, "  "+slot+": {") {
			lines[i] = stage
		}
	}
	src := strings.Join(lines, "\n") + c.Sections
	if !strings.HasSuffix(src, "\n") {
		src += "\n"
	}
	return src
}

func (f fixture) parse(src string) *config.Config {
	f.t.Helper()
	return configtest.MustParse(f.t, src, f.c.Registry)
}

func (f fixture) plan(src string) config.Plan {
	f.t.Helper()
	p, err := f.parse(src).Plan(context.Background())
	if err != nil {
		f.t.Fatalf("plan:\n%s\n%v", src, err)
	}
	f.t.Cleanup(func() { p.Close() })
	return p
}

// slotTask is the task p's stages have in slot.
func slotTask(p config.Plan, slot string) *pipeline.Task {
	return map[string]*pipeline.Task{pipeline.SlotSample: p.Stages.Sample, pipeline.SlotGenerate: p.Stages.Generate,
		pipeline.SlotReward: p.Stages.Reward, pipeline.SlotTrain: p.Stages.Train}[slot]
}

// The kind has a name, and the registry finds the kind by it.
func namedAndRegistered(f fixture) {
	name := f.c.Kind.Name()
	if name == "" {
		f.t.Fatal("Name() is empty")
	}
	got, ok := f.c.Registry.Lookup(name)
	if !ok || got.Name() != name {
		f.t.Fatalf("the registry has no kind %q (%s)", name, f.c.Registry.Hint())
	}
}

// The kind fills at least one slot, each one of the loop's, the case's
// among them.
func fillsRealSlots(f fixture) {
	slots := f.c.Kind.Slots()
	if len(slots) == 0 {
		f.t.Fatal("Slots() is empty")
	}
	for _, s := range slots {
		if _, ok := pipeline.SlotByName(s); !ok {
			f.t.Errorf("slot %q is not one of the loop's (%s)", s, strings.Join(pipeline.SlotNames(), ", "))
		}
	}
	if !slices.Contains(slots, f.c.Slot) {
		f.t.Errorf("the case's slot %s is not among the kind's %v", f.c.Slot, slots)
	}
}

// New returns a pointer to a struct (its fields' yaml tags are the
// kind's keys), a new one each call: stages of the kind in two slots or
// two files share nothing.
func newIsFresh(f fixture) {
	a, b := f.c.Kind.New(), f.c.Kind.New()
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Pointer || va.Elem().Kind() != reflect.Struct {
		f.t.Fatalf("New() returned %T, want a pointer to a struct", a)
	}
	// Pointers to a zero-size struct may be equal; such a value holds
	// nothing to share.
	if va.Elem().Type().Size() > 0 && va.Pointer() == vb.Pointer() {
		f.t.Fatalf("New() returned the same %T twice", a)
	}
}

// The valid stage plans into a task the loop can run in its slot: a
// name, a version, exactly one of a Go body or a command, and the
// outputs the loop reads of the slot (pipeline.Slots).
func taskTheLoopCanRun(f fixture) {
	p := f.plan(File(f.c, f.c.Slot, ""))
	task := slotTask(p, f.c.Slot)
	switch {
	case task == nil:
		f.t.Fatalf("the plan has no %s task", f.c.Slot)
	case task.Name == "" || task.Version == "":
		f.t.Fatalf("the %s task has name %q and version %q; it needs both", f.c.Slot, task.Name, task.Version)
	case (task.Run == nil) == (len(task.Command) == 0):
		f.t.Fatalf("the %s task needs exactly one of Run or Command", f.c.Slot)
	}
	slot, _ := pipeline.SlotByName(f.c.Slot)
	for _, out := range slot.Outputs {
		if !slices.ContainsFunc(task.Outputs, func(o pipeline.Output) bool { return o.Name == out }) {
			f.t.Errorf("the %s task declares no output %q (the loop reads %v)", f.c.Slot, out, slot.Outputs)
		}
	}
}

// versions are the versions of p's tasks, by name.
func versions(p config.Plan) map[string]string {
	out := map[string]string{}
	for _, t := range p.Stages.Tasks() {
		out[t.Name] = t.Version
	}
	return out
}

// The same file plans into the same task versions: the cache keys of a
// resumed run are the first run's.
func sameVersionsTwice(f fixture) {
	src := File(f.c, f.c.Slot, "")
	first, second := versions(f.plan(src)), versions(f.plan(src))
	if !reflect.DeepEqual(first, second) {
		f.t.Fatalf("task versions differ between two plans of the same file:\n%v\n%v", first, second)
	}
}

// The stage's version: key enters its task's version, so bumping it
// reruns the stage.
func versionKeyChangesVersion(f fixture) {
	before := slotTask(f.plan(File(f.c, f.c.Slot, "")), f.c.Slot).Version
	after := slotTask(f.plan(File(f.c, f.c.Slot, "version: kindtest-2")), f.c.Slot).Version
	if before == after {
		f.t.Fatalf("version: kindtest-2 left the %s task's version %s", f.c.Slot, before)
	}
}

// An unknown key is refused at its line and column, with its path.
func unknownKey(f fixture) {
	src := File(f.c, f.c.Slot, f.c.BadKey+": 1")
	path := "stages." + f.c.Slot
	if sk, ok := f.c.Kind.(kind.Sectioned); ok {
		if strings.Contains("\n"+f.c.Sections, "\n"+sk.Section()+":") {
			f.t.Fatalf("the case's sections set %s, where the suite writes BadKey for a sectioned kind", sk.Section())
		}
		src = File(f.c, f.c.Slot, "") + sk.Section() + ": {" + f.c.BadKey + ": 1}\n"
		path = sk.Section()
	}
	line, col := position(src, f.c.BadKey+": 1")
	want := fmt.Sprintf("pipeline.yaml:%d:%d: unknown key %q in %s", line, col, f.c.BadKey, path)
	_, err := config.Parse("pipeline.yaml", []byte(src), f.c.Registry)
	if err == nil || !strings.Contains(err.Error(), want) {
		f.t.Fatalf("want an error containing\n%s\ngot\n%v\nfor\n%s", want, err, src)
	}
}

// The kind in a slot it does not fill is refused, the message naming
// the kind and the stage's kind key.
func slotItDoesNotFill(f fixture) {
	i := slices.IndexFunc(pipeline.SlotNames(), func(s string) bool { return !kind.Fills(f.c.Kind, s) })
	other := pipeline.SlotNames()[i]
	src := File(f.c, other, "")
	_, err := config.Parse("pipeline.yaml", []byte(src), f.c.Registry)
	if err == nil {
		f.t.Fatalf("the %s kind in the %s slot parsed:\n%s", f.c.Kind.Name(), other, src)
	}
	line, col := position(src, "kind: "+f.c.Kind.Name())
	at := fmt.Sprintf("pipeline.yaml:%d:%d: stages.%s.kind: ", line, col, other)
	if msg := err.Error(); !strings.Contains(msg, at) || !strings.Contains(msg, f.c.Kind.Name()) {
		f.t.Fatalf("want an error at %q naming %s, got\n%v", at, f.c.Kind.Name(), err)
	}
}

// position is the 1-based line and column of the last occurrence of s
// in src.
func position(src, s string) (line, col int) {
	i := strings.LastIndex(src, s)
	before := src[:i]
	return strings.Count(before, "\n") + 1, i - strings.LastIndex(before, "\n")
}
