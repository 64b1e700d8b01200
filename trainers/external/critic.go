package external

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// PPO with a critic (docs/TRAINERS.md, "PPO with a critic"): the keys of
// the hyperparameters rlpipe reads, and the critic's files.
const (
	// Critic is the hyperparameter that turns PPO's critic on: a mapping
	// {lr, warmup, cliprange_value, missing}, written to the trainer as it
	// is plus the advantages section's gamma and lambda.
	Critic = "critic"
	// CriticMissing is the critic's key that says what a later iteration
	// does when the policy input has no critic/: MissingRefuse (the
	// default) or MissingFresh.
	CriticMissing = "missing"
	// KLInReward puts the KL into PPO's per-token rewards (gae only).
	KLInReward = "kl_in_reward"
	// ValueHeadFile is the critic's value head in CriticDir:
	// v_head.weight [1, hidden] and v_head.bias [1], float32.
	ValueHeadFile = "value_head.safetensors"
)

// Values of the critic's missing key.
const (
	MissingRefuse = "refuse"
	MissingFresh  = "fresh"
)

// GAE are PPO's estimator's options (the advantages section's gamma and
// lambda), handed to the trainer in hyperparameters.critic.
type GAE struct {
	Gamma  float64 `json:"gamma"`
	Lambda float64 `json:"lambda"`
}

// critic is hyperparameters.critic as rlpipe reads it.
type critic struct {
	keys    map[string]any
	missing string
}

// critic returns hyperparameters.critic; nil when the critic is off. A
// value that is not a mapping, or a missing key rlpipe cannot act on, is
// an ErrOptions.
func (o Options) critic() (*critic, error) {
	v, ok := o.Hyperparameters[Critic]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: hyperparameters.critic is %v (%T); it must be a mapping, e.g. {lr: 1.0e-5}", ErrOptions, v, v)
	}
	c := &critic{keys: m, missing: MissingRefuse}
	if x, ok := m[CriticMissing]; ok && x != nil {
		s, _ := x.(string)
		if s != MissingRefuse && s != MissingFresh {
			return nil, fmt.Errorf("%w: hyperparameters.critic.missing is %v; use %s or %s", ErrOptions, x, MissingRefuse, MissingFresh)
		}
		c.missing = s
	}
	return c, nil
}

// hparams are the hyperparameters written for the trainer: as given,
// with the critic's gamma and lambda from o.GAE when the critic is on.
func (o Options) hparams(c *critic) map[string]any {
	hp := maps.Clone(o.Hyperparameters)
	if hp == nil {
		hp = map[string]any{}
	}
	if c != nil && o.GAE != nil {
		keys := maps.Clone(c.keys)
		keys["gamma"], keys["lambda"] = o.GAE.Gamma, o.GAE.Lambda
		hp[Critic] = keys
	}
	return hp
}

// errNoCritic: a later iteration's policy input has no critic/ while the
// critic is on and its missing key says refuse.
var errNoCritic = errors.New("the policy input has no critic")

// checkCritic checks what the trainer wrote to --critic-out: a PEFT LoRA
// directory (checkAdapter) and a value head of one output, finite.
func checkCritic(dir string) error {
	if err := checkAdapter("--critic-out", dir); err != nil {
		return err
	}
	path := filepath.Join(dir, ValueHeadFile)
	f, err := safetensors.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the trainer exited 0 without writing %s into --critic-out %s (v_head.weight [1, hidden], v_head.bias [1], float32)", ErrContract, ValueHeadFile, dir)
	}
	if err != nil {
		return fmt.Errorf("%w: --critic-out: %w", ErrContract, err)
	}
	w, b := f.Tensors["v_head.weight"], f.Tensors["v_head.bias"]
	switch {
	case w.DType != safetensors.F32 || len(w.Shape) != 2 || w.Shape[0] != 1 || w.Shape[1] < 1:
		return fmt.Errorf("%w: --critic-out: %s: tensor \"v_head.weight\" is %s %v, want F32 [1, hidden]", ErrContract, path, cmp.Or(string(w.DType), "missing"), w.Shape)
	case b.DType != safetensors.F32 || !slices.Equal(b.Shape, []int{1}):
		return fmt.Errorf("%w: --critic-out: %s: tensor \"v_head.bias\" is %s %v, want F32 [1]", ErrContract, path, cmp.Or(string(b.DType), "missing"), b.Shape)
	}
	for _, name := range []string{"v_head.weight", "v_head.bias"} {
		if i, ok := firstNonFinite(f.Tensors[name]); !ok {
			return fmt.Errorf("%w: --critic-out: %s: tensor %q holds a NaN or infinite value at element %d; the critic diverged", ErrContract, path, name, i)
		}
	}
	return nil
}

// sampleKey names a sample.
type sampleKey struct {
	prompt string
	index  int32
}

// trainedTokens are the samples handed to the trainer to train on (the
// unmasked rows of the advantages) with their number of trainable tokens
// (the trajectory's token_ids: a single turn's completion, an episode's
// replies).
func trainedTokens(trajs []tables.Trajectory, adv []tables.Advantage) map[sampleKey]int {
	n := make(map[sampleKey]int, len(trajs))
	for _, t := range trajs {
		n[sampleKey{t.PromptID, t.SampleIndex}] = len(t.TokenIDs)
	}
	out := make(map[sampleKey]int, len(adv))
	for _, a := range adv {
		if !a.Mask {
			k := sampleKey{a.PromptID, a.SampleIndex}
			out[k] = n[k]
		}
	}
	return out
}

// valuesLine is one line of --values-out; a null entry is a value that
// was not finite.
type valuesLine struct {
	PromptID    *string    `json:"prompt_id"`
	SampleIndex *int32     `json:"sample_index"`
	Rewards     []*float64 `json:"rewards"`
	Values      []*float64 `json:"values"`
	Returns     []*float64 `json:"returns"`
	Advantages  []*float64 `json:"advantages"`
}

// readValues reads and checks the trainer's --values-out: one JSON
// object a line per trained sample, each a sample of trained, once, with
// one finite entry per trainable token in each list; used, when not
// negative, is the number of samples the trainer says it trained
// (samples_used), which the lines must match. The rows come back sorted
// by (prompt_id, sample_index). Errors wrap ErrContract and name the
// file, the line and the sample.
func readValues(path string, trained map[sampleKey]int, used int) ([]tables.TokenValue, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the trainer exited 0 without writing --values-out %s (one JSON object a line per trained sample)", ErrContract, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --values-out: %v", ErrContract, err)
	}
	var rows []tables.TokenValue
	seen := map[sampleKey]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		at := func(format string, a ...any) error {
			return fmt.Errorf("%w: --values-out %s line %d: %s", ErrContract, path, line, fmt.Sprintf(format, a...))
		}
		var l valuesLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			hint := ""
			if bytes.Contains(sc.Bytes(), []byte("NaN")) || bytes.Contains(sc.Bytes(), []byte("Infinity")) {
				hint = " (a NaN or infinity: the critic or the rewards are not finite)"
			}
			return nil, at("not a JSON object: %v%s", err, hint)
		}
		if l.PromptID == nil || l.SampleIndex == nil {
			return nil, at("it lacks prompt_id or sample_index")
		}
		k := sampleKey{*l.PromptID, *l.SampleIndex}
		row := fmt.Sprintf("sample %d of prompt %q", k.index, k.prompt)
		n, ok := trained[k]
		if !ok {
			return nil, at("%s was not handed to the trainer to train on (masked or absent in %s)", row, grpo.AdvantagesFile)
		}
		if first, dup := seen[k]; dup {
			return nil, at("%s again (first on line %d)", row, first)
		}
		seen[k] = line
		tv := tables.TokenValue{PromptID: k.prompt, SampleIndex: k.index}
		for _, col := range []struct {
			name string
			in   []*float64
			out  *[]float64
		}{{"rewards", l.Rewards, &tv.Rewards}, {"values", l.Values, &tv.Values}, {"returns", l.Returns, &tv.Returns}, {"advantages", l.Advantages, &tv.Advantages}} {
			if len(col.in) != n {
				return nil, at("%s: %s has %d entries for its %d trainable tokens", row, col.name, len(col.in), n)
			}
			*col.out = make([]float64, n)
			for j, x := range col.in {
				if x == nil || math.IsNaN(*x) || math.IsInf(*x, 0) {
					return nil, at("%s: %s entry %d (trainable token %d) is null, a value that was not finite; the critic diverged or its state is corrupt: resume from an earlier iteration, or lower critic.lr",
						row, col.name, j, j+1)
				}
				(*col.out)[j] = *x
			}
		}
		rows = append(rows, tv)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: --values-out %s: %v", ErrContract, path, err)
	}
	if used >= 0 && len(rows) != used {
		return nil, fmt.Errorf("%w: --values-out %s has %d rows for the %d samples the trainer reports training (samples_used)", ErrContract, path, len(rows), used)
	}
	slices.SortFunc(rows, func(a, b tables.TokenValue) int {
		return cmp.Or(cmp.Compare(a.PromptID, b.PromptID), cmp.Compare(a.SampleIndex, b.SampleIndex))
	})
	return rows, nil
}

// samplesUsed is the trainer's samples_used metric, -1 without one.
func samplesUsed(m map[string]json.RawMessage) int {
	n := -1
	if raw, ok := m["samples_used"]; ok {
		if err := json.Unmarshal(raw, &n); err != nil {
			return -1
		}
	}
	return n
}

// freshCritic decides, with the critic on, what a call whose policy
// input has no critic/ does: at the first iteration (or from an
// initial_policy trained without one) the trainer starts a fresh
// critic; at a later one the call is refused unless the critic's
// missing key says fresh, which is logged — a critic is never silently
// reinitialised.
func freshCritic(tc *pipeline.TaskContext, c *critic, ps paths, iteration int) error {
	if c == nil || ps.CriticIn != "" || iteration <= 1 {
		return nil
	}
	if c.missing != MissingFresh {
		return fmt.Errorf("%w: the policy input %s has no %s/ directory while hyperparameters.critic is on: continue from an adapter trained with the critic, or set hyperparameters.critic.missing: fresh to start a new critic",
			errNoCritic, runs.AdapterPath(iteration-1), grpo.CriticDir)
	}
	log := tc.Logger()
	log.Info().Int("iteration", iteration).Msg("the policy input has no critic/: a new critic starts (hyperparameters.critic.missing: fresh)")
	return nil
}

// writeValues checks the critic the trainer wrote and turns its
// --values-out into the values output.
func writeValues(tc *pipeline.TaskContext, ps paths, trained map[sampleKey]int, used int) error {
	if err := checkCritic(ps.CriticOut); err != nil {
		return err
	}
	rows, err := readValues(ps.ValuesOut, trained, used)
	if err != nil {
		return err
	}
	if err := tables.WriteFile(tc.OutputPath(grpo.OutValues), tables.TokenValues, rows, nil); err != nil {
		return fmt.Errorf("write values: %w", err)
	}
	return nil
}
