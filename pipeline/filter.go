package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Dynamic sampling (DAPO; verl's algorithm.filter_groups, the file's
// filter_groups section, LoopConfig.MaxGenBatches): an iteration whose
// first generation batch holds fewer than batch_size informative groups
// (a prompt whose scored rewards are not all equal) draws the next
// batch_size prompts of the dataset, generates and scores them, and goes
// on until the rounds hold batch_size informative groups or
// MaxGenBatches rounds are spent. Each round is a sample, a generate and
// a reward call of its own, named "sample-round-RR" (round 0 keeps the
// slots' names), with its outputs under runs.RoundDir; FilterGroupsTask
// then writes the iteration's prompts, trajectories and rewards: the
// first batch_size informative groups, in round order, then (when the
// rounds fell short) the first zero-variance groups, to keep the batch
// at batch_size prompts (the advantages step masks them). The decision
// to draw another round reads only the committed-to-be rewards of the
// rounds before it, so a resumed iteration takes the same rounds, each a
// cache hit: a round is sampled exactly once. The cursor advances by
// every prompt drawn (rounds × batch_size): like verl's dataloader, a
// refill consumes its prompts, which come again only in a later epoch.

// FilterGroupsName names the task that merges an iteration's rounds,
// its call and its environment.
const FilterGroupsName = "filter-groups"

// OutFilter is FilterGroupsTask's record of the rounds (FilterGroups,
// filter_groups.json).
const OutFilter = "filter"

// Why the rounds stopped (FilterGroups.Stop).
const (
	StopFull          = "full"
	StopMaxGenBatches = "max_num_gen_batches"
)

// FilterGroups is filter_groups.json: an iteration's rounds, which groups
// it kept and why it stopped.
type FilterGroups struct {
	BatchSize     int           `json:"batch_size"`
	MaxGenBatches int           `json:"max_num_gen_batches"`
	Rounds        []FilterRound `json:"rounds"`
	// PromptsDrawn counts every prompt the rounds drew (rounds ×
	// batch_size): what the iteration takes from the dataset's cursor.
	PromptsDrawn int `json:"prompts_drawn"`
	// GroupsKept are the informative groups in the batch, GroupsPadded
	// the zero-variance ones that fill it when the rounds fell short,
	// GroupsDropped the drawn groups left out (zero variance, or
	// informative beyond batch_size, or a prompt drawn again).
	GroupsKept    int `json:"groups_kept"`
	GroupsPadded  int `json:"groups_padded"`
	GroupsDropped int `json:"groups_dropped"`
	// Shortfall is batch_size − GroupsKept: informative groups missing
	// when MaxGenBatches rounds were spent.
	Shortfall int `json:"shortfall"`
	// Stop is StopFull or StopMaxGenBatches.
	Stop string `json:"stop"`
}

// FilterRound is one round of FilterGroups.
type FilterRound struct {
	Round int `json:"round"`
	// Dir holds the round's prompts, trajectories and rewards.
	Dir string `json:"dir"`
	// Cursor is the dataset position the round's prompts start at.
	Cursor  int `json:"cursor"`
	Prompts int `json:"prompts"`
	// Informative counts the round's groups with a reward spread, not
	// counting a prompt an earlier round drew (Repeated).
	Informative int `json:"informative"`
	Repeated    int `json:"repeated,omitempty"`
	// Why the round was drawn.
	Why string `json:"why"`
}

// filterParams are FilterGroupsTask's call parameters.
type filterParams struct {
	Iteration     int `json:"iteration"`
	BatchSize     int `json:"batch_size"`
	Cursor        int `json:"cursor"`
	Rounds        int `json:"rounds"`
	MaxGenBatches int `json:"max_num_gen_batches"`
}

// roundInput names FilterGroupsTask's input of output out of round r
// ("rewards-01").
func roundInput(out string, r int) string { return fmt.Sprintf("%s-%02d", out, r) }

// roundCall names round r's call of slot ("generate-round-01"); round 0
// is the slot's own call.
func roundCall(slot string, r int) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf("%s-round-%02d", slot, r)
}

// Informative lists, for each round's rewards in round order, the prompts
// that first appear in it and whose scored rewards (tables.Reward.Scored)
// are not all equal — the groups that carry a signal, the same test as
// the advantages' zero-variance mask — and the prompts an earlier round
// already drew.
func Informative(rounds [][]tables.Reward) (informative, repeated [][]string) {
	seen := map[string]bool{}
	for _, rows := range rounds {
		vals := map[string][]float64{}
		var order []string
		for _, r := range rows {
			if _, ok := vals[r.PromptID]; !ok {
				order = append(order, r.PromptID)
				vals[r.PromptID] = nil
			}
			if r.Scored() {
				vals[r.PromptID] = append(vals[r.PromptID], r.Total)
			}
		}
		var inf, rep []string
		for _, id := range order {
			if seen[id] {
				rep = append(rep, id)
				continue
			}
			seen[id] = true
			if v := vals[id]; len(v) >= 2 {
				if _, variance := tables.MeanVariance(v); variance > 0 {
					inf = append(inf, id)
				}
			}
		}
		informative, repeated = append(informative, inf), append(repeated, rep)
	}
	return informative, repeated
}

// FilterGroupsTask is the task that merges an iteration's rounds into its
// batch (see Informative and the package's dynamic sampling notes):
// inputs "prompts-RR", "trajectories-RR", "rewards-RR" for each round,
// outputs "prompts", "trajectories", "rewards" (the iteration's files)
// and "filter" (filter_groups.json). Deterministic.
func FilterGroupsTask() *Task {
	return &Task{Name: FilterGroupsName, Version: "1", Env: FilterGroupsName, Deterministic: true,
		Outputs: []Output{
			{Name: OutPrompts, File: runs.PromptsFile, Check: func(p string) error { return tables.CheckFile(p, tables.Prompts) }},
			{Name: OutTrajectories, File: runs.TrajectoriesFile, Check: func(p string) error { return tables.CheckFile(p, tables.Trajectories) }},
			{Name: OutRewards, File: runs.RewardsFile, Check: func(p string) error { return tables.CheckFile(p, tables.Rewards) }},
			{Name: OutFilter, File: runs.FilterGroupsFile},
		},
		Run: runFilterGroups,
	}
}

func runFilterGroups(ctx context.Context, tc *TaskContext) error {
	var p filterParams
	if err := tc.Params(&p); err != nil {
		return err
	}
	if p.Rounds < 1 || p.BatchSize < 1 {
		return Permanent(fmt.Errorf("task %s: %d rounds of batch size %d: want at least one round of one prompt", tc.Task, p.Rounds, p.BatchSize))
	}
	prompts := make([][]tables.Prompt, p.Rounds)
	trajs := make([][]tables.Trajectory, p.Rounds)
	rewards := make([][]tables.Reward, p.Rounds)
	for r := range p.Rounds {
		var err error
		if prompts[r], err = ReadInput(tc, roundInput(OutPrompts, r), tables.Prompts); err != nil {
			return err
		}
		if trajs[r], err = ReadInput(tc, roundInput(OutTrajectories, r), tables.Trajectories); err != nil {
			return err
		}
		if rewards[r], err = ReadInput(tc, roundInput(OutRewards, r), tables.Rewards); err != nil {
			return err
		}
	}
	rec, keep := selectGroups(prompts, rewards, p)
	var outP []tables.Prompt
	var outT []tables.Trajectory
	var outR []tables.Reward
	for _, k := range keep {
		for _, x := range prompts[k.round] {
			if x.PromptID == k.id {
				outP = append(outP, x)
			}
		}
		for _, x := range trajs[k.round] {
			if x.PromptID == k.id {
				outT = append(outT, x)
			}
		}
		for _, x := range rewards[k.round] {
			if x.PromptID == k.id {
				outR = append(outR, x)
			}
		}
	}
	if err := tables.WriteFile(tc.OutputPath(OutPrompts), tables.Prompts, outP, nil); err != nil {
		return err
	}
	if err := tables.WriteFile(tc.OutputPath(OutTrajectories), tables.Trajectories, outT, nil); err != nil {
		return err
	}
	if err := tables.WriteFile(tc.OutputPath(OutRewards), tables.Rewards, outR, nil); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return Permanent(err)
	}
	return os.WriteFile(tc.OutputPath(OutFilter), append(b, '\n'), 0o644)
}

// keptGroup is a group selectGroups keeps: a prompt of a round.
type keptGroup struct {
	round int
	id    string
}

// selectGroups picks the batch from the rounds: the first BatchSize
// informative groups in round order, then, when they fall short, the
// first zero-variance groups (never a prompt an earlier round drew).
func selectGroups(prompts [][]tables.Prompt, rewards [][]tables.Reward, p filterParams) (FilterGroups, []keptGroup) {
	inf, rep := Informative(rewards)
	rec := FilterGroups{BatchSize: p.BatchSize, MaxGenBatches: p.MaxGenBatches, Stop: StopMaxGenBatches}
	isInf := map[keptGroup]bool{}
	total := 0
	for r := range prompts {
		why := "the iteration's batch"
		if r > 0 {
			why = fmt.Sprintf("%d informative groups of %d after round %d", total, p.BatchSize, r-1)
		}
		rec.Rounds = append(rec.Rounds, FilterRound{Round: r, Dir: runs.RoundDir(p.Iteration, r), Cursor: p.Cursor + r*p.BatchSize,
			Prompts: len(prompts[r]), Informative: len(inf[r]), Repeated: len(rep[r]), Why: why})
		for _, id := range inf[r] {
			isInf[keptGroup{r, id}] = true
		}
		total += len(inf[r])
		rec.PromptsDrawn += len(prompts[r])
	}
	if total >= p.BatchSize {
		rec.Stop = StopFull
	}
	// A prompt drawn again by a later round (the dataset wrapped around)
	// is kept at most once, from the round that drew it first.
	first := map[string]int{}
	for r := len(prompts) - 1; r >= 0; r-- {
		for _, x := range prompts[r] {
			first[x.PromptID] = r
		}
	}
	var keep []keptGroup
	for _, pad := range []bool{false, true} {
		for r := range prompts {
			for _, x := range prompts[r] {
				k := keptGroup{r, x.PromptID}
				if len(keep) == p.BatchSize || first[x.PromptID] != r || isInf[k] == pad {
					continue
				}
				keep = append(keep, k)
				if pad {
					rec.GroupsPadded++
				} else {
					rec.GroupsKept++
				}
			}
		}
	}
	rec.GroupsDropped = rec.PromptsDrawn - len(keep)
	rec.Shortfall = p.BatchSize - rec.GroupsKept
	return rec, keep
}

// readRewards reads a finished node's rewards table from the store.
func (r *Run) readRewards(ctx context.Context, a Artifact) ([]tables.Reward, error) {
	b, err := artifacts.ReadObject(ctx, r.store, a.Ref, a.Path)
	if err != nil {
		return nil, fmt.Errorf("read rewards %s: %w", a.Path, err)
	}
	return tables.Read(bytes.NewReader(b), int64(len(b)), a.Path, tables.Rewards)
}

// refill draws iteration n's further rounds after its first (whose
// sample, generate and reward nodes are in nodes) until they hold
// cfg.BatchSize informative groups or cfg.MaxGenBatches rounds are
// spent, then merges them with FilterGroupsTask, whose node takes the
// three slots' places in nodes. gen starts a round's generate call (in
// generation order). It returns the number of rounds. A round whose
// reward failed ends the rounds: the merge then fails upstream, and the
// iteration with it.
func (r *Run) refill(ctx context.Context, it *Iteration, cfg LoopConfig, st Stages, nodes map[string]*Node, cursor int,
	gen func(name, dir string, prompts Artifact) *Node) (int, error) {
	n := it.N
	rounds := []map[string]*Node{{SlotSample: nodes[SlotSample], SlotGenerate: nodes[SlotGenerate], SlotReward: nodes[SlotReward]}}
	var seen [][]tables.Reward
	for len(rounds) < cfg.MaxGenBatches {
		a, err := rounds[len(rounds)-1][SlotReward].Result(OutRewards)
		if err != nil {
			break
		}
		rows, err := r.readRewards(ctx, a)
		if err != nil {
			return 0, fmt.Errorf("dynamic sampling of iteration %d, round %d: %w", n, len(rounds)-1, err)
		}
		seen = append(seen, rows)
		inf, _ := Informative(seen)
		total := 0
		for _, ids := range inf {
			total += len(ids)
		}
		if total >= cfg.BatchSize {
			break
		}
		k, dir := len(rounds), runs.RoundDir(n, len(rounds))
		s := it.Go(ctx, st.Sample, Call{Name: roundCall(SlotSample, k), Dir: dir,
			Inputs: map[string]Artifact{"dataset": cfg.Dataset},
			Params: map[string]int{"cursor": cursor + k*cfg.BatchSize, "count": cfg.BatchSize, "iteration": n}})
		g := gen(roundCall(SlotGenerate, k), dir, s.Output(OutPrompts))
		w := it.Go(ctx, st.Reward, Call{Name: roundCall(SlotReward, k), Dir: dir,
			Inputs: map[string]Artifact{"trajectories": g.Output(OutTrajectories), "prompts": s.Output(OutPrompts)},
			Params: map[string]int{"iteration": n}})
		rounds = append(rounds, map[string]*Node{SlotSample: s, SlotGenerate: g, SlotReward: w})
	}
	in := map[string]Artifact{}
	for k, rn := range rounds {
		in[roundInput(OutPrompts, k)] = rn[SlotSample].Output(OutPrompts)
		in[roundInput(OutTrajectories, k)] = rn[SlotGenerate].Output(OutTrajectories)
		in[roundInput(OutRewards, k)] = rn[SlotReward].Output(OutRewards)
	}
	merge := it.Go(ctx, st.FilterGroups, Call{Inputs: in, Params: filterParams{Iteration: n, BatchSize: cfg.BatchSize, Cursor: cursor,
		Rounds: len(rounds), MaxGenBatches: cfg.MaxGenBatches}})
	for _, slot := range []string{SlotSample, SlotGenerate, SlotReward} {
		nodes[slot] = merge
	}
	return len(rounds), nil
}
