package pipeline

// A Slot is a place in the RL iteration that a stage fills. Its name is
// the stage's key under stages: in pipeline.yaml and the name of the task
// calls Loop makes for it; Inputs, Outputs and Params are what Loop hands
// the stage and what it needs back. Every package that needs the loop's
// stages (the config's checks, the live display, the UI, the stand-ins)
// reads them here, so that the loop's shape is spelled once.
type Slot struct {
	Name string
	// Inputs are the inputs Loop hands the stage; "policy" is absent in
	// the first iteration unless LoopConfig.InitialPolicy is set.
	Inputs []string
	// Outputs are the outputs Loop needs from the stage.
	Outputs []string
	// Params are the parameters Loop passes each call.
	Params []string
}

// Slot names, in loop order.
const (
	SlotSample   = "sample"
	SlotGenerate = "generate"
	SlotReward   = "reward"
	SlotTrain    = "train"
)

// Slots are the four stages of an iteration in loop order, as Loop wires
// them (see Stages).
var Slots = []Slot{
	{Name: SlotSample, Inputs: []string{"dataset"}, Outputs: []string{OutPrompts}, Params: []string{"cursor", "count", "iteration"}},
	{Name: SlotGenerate, Inputs: []string{"prompts", "policy"}, Outputs: []string{OutTrajectories}, Params: []string{"iteration", "policy_iteration", "staleness"}},
	{Name: SlotReward, Inputs: []string{"trajectories", "prompts"}, Outputs: []string{OutRewards}, Params: []string{"iteration"}},
	{Name: SlotTrain, Inputs: []string{"rewards", "trajectories", "prompts", "policy"}, Outputs: []string{OutAdapter, OutMetrics}, Params: []string{"iteration"}},
}

// SlotNames are the slots' names in loop order.
func SlotNames() []string {
	out := make([]string, len(Slots))
	for i, s := range Slots {
		out[i] = s.Name
	}
	return out
}

// SlotByName returns the slot of that name.
func SlotByName(name string) (Slot, bool) {
	for _, s := range Slots {
		if s.Name == name {
			return s, true
		}
	}
	return Slot{}, false
}
