package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// ppoOptions are PPO's options with γ = λ = 1 (verl's defaults) and the
// critic at lr 1e-3.
func ppoOptions(warmup int) embedded.Options {
	return embedded.Options{Critic: &embedded.CriticOptions{LR: 1e-3, Warmup: warmup}, GAE: &embedded.GAEOptions{Gamma: 1, Lambda: 1}}
}

// withOutcomeAdvantages gives b the advantages table the gae estimator
// writes: each scored row's reward as its advantage, nothing masked.
func withOutcomeAdvantages(b embedded.Batch) embedded.Batch {
	b.Advantages = nil
	for _, r := range b.Rewards {
		b.Advantages = append(b.Advantages, tables.Advantage{PromptID: r.PromptID, SampleIndex: r.SampleIndex, Advantage: r.Total, GroupSize: 1})
	}
	return b
}

// gaeRef is GAE over a sequence whose every token is trainable, written
// from the recursion A_t = δ_t + γλ·A_{t+1}, δ_t = r_t + γ·V_{t+1} − V_t.
func gaeRef(rewards, values []float64, gamma, lambda float64) (ret []float64) {
	n := len(rewards)
	ret = make([]float64, n)
	next, last := 0.0, 0.0
	for t := n - 1; t >= 0; t-- {
		last = rewards[t] + gamma*next - values[t] + gamma*lambda*last
		next = values[t]
		ret[t] = last + values[t]
	}
	return ret
}

// TestOptionsValidatePPO: each PPO option that cannot work names its
// key, and what to do.
func TestOptionsValidatePPO(t *testing.T) {
	gae := &embedded.GAEOptions{Gamma: 1, Lambda: 1}
	for _, c := range []struct {
		name string
		o    embedded.Options
		want string
	}{
		{"critic lr negative", embedded.Options{GAE: gae, Critic: &embedded.CriticOptions{LR: -1}}, "invalid trainer options: critic.lr: -1; it must be positive (try 1e-3)"},
		{"cliprange_value negative", embedded.Options{GAE: gae, Critic: &embedded.CriticOptions{ClipRangeValue: -0.2}}, "invalid trainer options: critic.cliprange_value: -0.2; it must be positive (verl's default is 0.5)"},
		{"warmup negative", embedded.Options{GAE: gae, Critic: &embedded.CriticOptions{Warmup: -1}}, "invalid trainer options: critic.warmup: -1; it must be ≥ 0"},
		{"missing unknown", embedded.Options{GAE: gae, Critic: &embedded.CriticOptions{Missing: "rebuild"}}, `invalid trainer options: critic.missing: "rebuild"; use refuse or fresh`},
		{"gae without critic", embedded.Options{GAE: gae}, "invalid trainer options: critic: missing; PPO's estimator gae needs a critic: set trainer.critic, e.g. {lr: 1e-3}"},
		{"critic without gae", embedded.Options{Critic: &embedded.CriticOptions{}}, "invalid trainer options: critic: the critic trains with PPO's estimator only: set advantages: {estimator: gae}, or remove trainer.critic"},
		{"kl_in_reward without gae", embedded.Options{KLInReward: true, Beta: 0.01}, "invalid trainer options: kl_in_reward: true; the KL enters PPO's per-token rewards only: set advantages: {estimator: gae}, or keep the KL in the loss with beta alone"},
		{"kl_in_reward without beta", embedded.Options{GAE: gae, Critic: &embedded.CriticOptions{}, KLInReward: true}, "invalid trainer options: kl_in_reward: true but beta is 0, which weighs the KL; set trainer.beta, e.g. 0.01"},
		{"lambda above 1", embedded.Options{GAE: &embedded.GAEOptions{Gamma: 1, Lambda: 1.5}, Critic: &embedded.CriticOptions{}}, "invalid trainer options: gae: gamma 1 and lambda 1.5 must be in [0, 1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.EnsureDefaults()
			err := c.o.Validate()
			if err == nil || err.Error() != c.want || !errors.Is(err, embedded.ErrOptions) {
				t.Fatalf("error %v\nwant %s", err, c.want)
			}
		})
	}
}

// The PPO options enter the train task's version only when set: the
// default's version is the one before PPO existed.
func TestPPOVersion(t *testing.T) {
	m := embeddedModel(t)
	def, err := embedded.Options{}.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	o := ppoOptions(0)
	ppo, err := o.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	o.Critic.ClipRangeValue = 0.2
	clip, err := o.Version(m)
	if err != nil {
		t.Fatal(err)
	}
	if ppo == def || clip == ppo {
		t.Fatalf("versions: default %s, ppo %s, ppo with cliprange_value 0.2 %s: want all different", def, ppo, clip)
	}
}

// One PPO update with n: 1 (every sample alone in its group) trains, and
// its values rows hold one entry per sampled token of each trained
// sample: a fresh critic values every token at 0, so with γ = λ = 1
// every return is the sample's reward, the rewards are 0 but on the
// last token, and the whitened advantages have mean 0 over the batch.
func TestPPOUpdateValuesRows(t *testing.T) {
	m := embeddedModel(t)
	b := withOutcomeAdvantages(sampleBatch(t, m, nil, 12, 3))
	// n: 1: keep sample 0 of each prompt.
	var one embedded.Batch
	one.Prompts = b.Prompts
	for i, tr := range b.Trajectories {
		if tr.SampleIndex == 0 {
			one.Trajectories = append(one.Trajectories, tr)
			one.Rewards = append(one.Rewards, b.Rewards[i])
			one.Advantages = append(one.Advantages, b.Advantages[i])
		}
	}
	one.Rewards[0].Total, one.Advantages[0].Advantage = 1, 1 // one sample with a reward
	res, err := newTrainer(t, m, ppoOptions(0)).Update(context.Background(), one)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Values) != 12 || len(res.Metrics.Steps) != 1 || res.Metrics.PPOFigures == nil {
		t.Fatalf("%d values rows, %d steps, PPO figures %v: want 12 rows, 1 step and the figures", len(res.Values), len(res.Metrics.Steps), res.Metrics.PPOFigures)
	}
	var sum float64
	tokens := 0
	for i, row := range res.Values {
		tr := one.Trajectories[i]
		if row.PromptID != tr.PromptID || row.SampleIndex != tr.SampleIndex {
			t.Fatalf("values row %d is sample %d of %q, want sample %d of %q", i, row.SampleIndex, row.PromptID, tr.SampleIndex, tr.PromptID)
		}
		n := len(tr.TokenIDs)
		if len(row.Values) != n || len(row.Rewards) != n || len(row.Returns) != n || len(row.Advantages) != n {
			t.Fatalf("values row %d has %d/%d/%d/%d entries for %d tokens", i, len(row.Rewards), len(row.Values), len(row.Returns), len(row.Advantages), n)
		}
		reward := one.Rewards[i].Total
		for j := range n {
			wantR := 0.0
			if j == n-1 {
				wantR = reward
			}
			if row.Values[j] != 0 || row.Rewards[j] != wantR || row.Returns[j] != reward {
				t.Fatalf("row %d token %d: reward %g value %g return %g, want %g, 0, %g", i, j, row.Rewards[j], row.Values[j], row.Returns[j], wantR, reward)
			}
			sum += row.Advantages[j]
			tokens++
		}
	}
	if math.Abs(sum/float64(tokens)) > 1e-9 {
		t.Errorf("whitened advantages have mean %g over %d tokens, want 0", sum/float64(tokens), tokens)
	}
	f := res.Metrics.PPOFigures
	if f.ValuesMean != 0 || f.ValueLoss <= 0 || f.CriticGradNorm <= 0 || res.Metrics.Steps[0].CriticStep == nil {
		t.Errorf("PPO figures %+v, step %+v: want values_mean 0, a positive value loss and critic gradient", f, res.Metrics.Steps[0])
	}
}

// In episodes, GAE runs over the trainable tokens and carries the next
// value and the running advantage across the observations between
// replies: each values row (its trainable tokens only) has the returns
// of GAE over that row alone. Checked at λ = 0.5 on the second update,
// when the critic's values are no longer 0.
func TestPPOEpisodeGAECarriesAcrossObservations(t *testing.T) {
	m := embeddedModel(t)
	b := withOutcomeAdvantages(episodeBatch(t, m, 6, 2))
	for i := range b.Rewards {
		if i%3 == 0 {
			b.Rewards[i].Total, b.Advantages[i].Advantage = 1, 1
		}
	}
	o := ppoOptions(0)
	o.GAE.Lambda, o.GAE.Gamma = 0.5, 0.9
	tr := newTrainer(t, m, o)
	if _, err := tr.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	observed := 0
	for i, row := range res.Values {
		traj := b.Trajectories[i]
		if len(row.Values) != len(traj.TokenIDs) {
			t.Fatalf("episode %d: %d values for %d reply tokens", i, len(row.Values), len(traj.TokenIDs))
		}
		for _, mark := range traj.Trainable {
			if mark == 0 {
				observed++
			}
		}
		want := gaeRef(row.Rewards, row.Values, 0.9, 0.5)
		for j := range want {
			if math.Abs(row.Returns[j]-want[j]) > 1e-12 {
				t.Fatalf("episode %d reply token %d: return %.15g, GAE over its trainable tokens %.15g", i, j, row.Returns[j], want[j])
			}
		}
		if row.Values[0] == 0 {
			t.Fatalf("episode %d: the second update's values are still 0", i)
		}
	}
	if observed == 0 {
		t.Fatal("the episodes have no observation tokens")
	}
}

// During the critic's warm-up the policy takes no step: its adapter and
// optimizer come out byte-identical, while the critic moves; after it,
// the policy trains.
func TestPPOWarmupLeavesThePolicy(t *testing.T) {
	m := embeddedModel(t)
	b := withOutcomeAdvantages(sampleBatch(t, m, nil, 6, 4))
	b.Rewards[0].Total, b.Advantages[0].Advantage = 1, 1
	tr := newTrainer(t, m, ppoOptions(1))
	before := t.TempDir()
	if err := tr.Save(before); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	warm := t.TempDir()
	if err := tr.Save(warm); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{safetensors.AdapterWeightsFile, embedded.OptimizerFile} {
		if !bytes.Equal(readFile(t, before, f), readFile(t, warm, f)) {
			t.Errorf("the warm-up update changed the policy's %s", f)
		}
	}
	crit := filepath.Join(embedded.CriticDir, tiny.ValueHeadFile)
	if bytes.Equal(readFile(t, before, crit), readFile(t, warm, crit)) {
		t.Errorf("the warm-up update left the critic's %s unchanged", crit)
	}
	if _, err := tr.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	after := t.TempDir()
	if err := tr.Save(after); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(readFile(t, warm, safetensors.AdapterWeightsFile), readFile(t, after, safetensors.AdapterWeightsFile)) {
		t.Error("the update after the warm-up left the policy unchanged")
	}
	if st := tr.State(); st.Updates != 2 || st.OptimizerSteps != 1 || st.CriticUpdates != 2 || st.CriticOptimizerSteps != 2 {
		t.Errorf("trainer state %+v: want 2 updates, 1 policy step, 2 critic updates and steps", st)
	}
}

// A critic whose value head holds a NaN fails the update permanently, naming
// the first row and token it values.
func TestPPONonFiniteValuesNameTheRow(t *testing.T) {
	m := embeddedModel(t)
	b := withOutcomeAdvantages(sampleBatch(t, m, nil, 4, 5))
	tr := newTrainer(t, m, ppoOptions(0))
	dir := t.TempDir()
	if err := tr.Save(dir); err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(dir, embedded.CriticDir, tiny.ValueHeadFile)
	f, err := safetensors.ReadFile(head)
	if err != nil {
		t.Fatal(err)
	}
	f.Tensors[tiny.ValueHeadBias] = safetensors.FromFloat32([]int{1}, []float32{float32(math.NaN())})
	if err := safetensors.WriteFile(head, f); err != nil {
		t.Fatal(err)
	}
	// The optimizer state holds the parameters too: without it (a critic
	// the torch script wrote) the head file is what loads.
	if err := os.Remove(filepath.Join(dir, embedded.CriticDir, embedded.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	loaded, err := embedded.Load(m, ppoOptions(0), dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = loaded.Update(context.Background(), b)
	want := `sample 0 of prompt "a00000": the critic's value at completion token 1 is NaN: non-finite loss; the critic diverged or its state is corrupt: retrain it (trainer.critic.missing: fresh from an adapter without critic/) or lower trainer.critic.lr`
	if err == nil || err.Error() != want || !errors.Is(err, grpo.ErrNonFinite) {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

// A run that turns the critic on at iteration 2, continuing from
// iteration 1's adapter (trained without one), is refused with what to
// do; trainer.critic.missing: fresh starts a new critic instead, and the
// iteration's adapter then holds it.
func TestPPOMissingCriticOnResume(t *testing.T) {
	m := embeddedModel(t)
	st := newStore(t, 64)
	r := openRun(t, st, "f", 5)
	ctx := context.Background()
	if _, err := r.Loop(ctx, loopConfig(1, faultBatch), stages(t, m, embedded.Task(m, embedded.Options{}))); err != nil {
		t.Fatal(err)
	}
	_, err := r.Loop(ctx, loopConfig(2, faultBatch), stages(t, m, embedded.Task(m, ppoOptions(0))))
	want := "train iteration 2: load the policy input iterations/000001/adapter: it has no critic (no critic/ directory) while trainer.critic is on, and a critic is never silently reinitialised: continue from an adapter trained with the critic, or set trainer.critic.missing: fresh to start a new one"
	if !errors.Is(err, embedded.ErrNoCritic) || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant a permanent error saying %s", err, want)
	}
	fresh := ppoOptions(0)
	fresh.Critic.Missing = embedded.MissingFresh
	if _, err := r.Loop(ctx, loopConfig(2, faultBatch), stages(t, m, embedded.Task(m, fresh))); err != nil {
		t.Fatal(err)
	}
	dir := standintest.Fetch(t, st, r.Branch(), "iterations/000002/adapter")
	if _, err := m.LoadCritic(filepath.Join(dir, embedded.CriticDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, embedded.CriticDir, embedded.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	// The iteration's values.parquet has a row per trained sample, in
	// (prompt id, sample index) order, an entry per token.
	var met embedded.Metrics
	if err := json.Unmarshal(standintest.Read(t, st, r.Branch(), runs.IterationPath(2, runs.TrainMetricsFile)), &met); err != nil {
		t.Fatal(err)
	}
	rows := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(2, runs.ValuesFile), tables.TokenValues)
	trajs := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(2, runs.TrajectoriesFile), tables.Trajectories)
	if len(rows) != met.Used || met.Used == 0 {
		t.Fatalf("values.parquet has %d rows for %d trained samples", len(rows), met.Used)
	}
	tokens := map[string]int{}
	for _, tr := range trajs {
		tokens[fmt.Sprint(tr.PromptID, "/", tr.SampleIndex)] = len(tr.TokenIDs)
	}
	for i, row := range rows {
		if i > 0 && (rows[i-1].PromptID > row.PromptID || rows[i-1].PromptID == row.PromptID && rows[i-1].SampleIndex >= row.SampleIndex) {
			t.Fatalf("values row %d (%s, %d) is out of order", i, row.PromptID, row.SampleIndex)
		}
		if n := tokens[fmt.Sprint(row.PromptID, "/", row.SampleIndex)]; len(row.Values) != n || len(row.Advantages) != n {
			t.Fatalf("values row %d has %d values, %d advantages for %d tokens", i, len(row.Values), len(row.Advantages), n)
		}
	}
}

// With kl_in_reward the KL leaves the loss (kl is null) and every
// trainable token's reward gets −β·(logπ_old − logπ_ref), logπ_old the
// sampler's logprobs and logπ_ref the base model's; the sample's reward
// stays on its last token.
func TestPPOKLInReward(t *testing.T) {
	m := embeddedModel(t)
	tr := newTrainer(t, m, embedded.Options{LR: 5e-3})
	warm := withOutcomeAdvantages(sampleBatch(t, m, nil, 4, 6))
	warm.Rewards[0].Total = 1
	if _, err := tr.Update(context.Background(), warm); err != nil {
		t.Fatal(err)
	}
	// Samples of the trained adapter, so that logπ_old ≠ logπ_ref.
	b := withOutcomeAdvantages(sampleBatch(t, m, tr.Adapter(), 4, 7))
	b.Rewards[1].Total, b.Advantages[1].Advantage = 1, 1
	const beta = 0.05
	o := ppoOptions(0)
	o.KLInReward, o.Beta = true, beta
	res, err := newTrainer(t, m, o).Update(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.KL != nil {
		t.Errorf("kl %g: the KL should have left the loss", *res.Metrics.KL)
	}
	exs := make([]tiny.Example, len(b.Trajectories))
	for i, traj := range b.Trajectories {
		p, err := m.PromptTokens(policy.PromptRequest(b.Prompts[i/8], 0))
		if err != nil {
			t.Fatal(err)
		}
		exs[i] = tiny.Example{Prompt: p, Completion: traj.TokenIDs}
	}
	ref, _, err := m.Score(context.Background(), nil, exs)
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for i, row := range res.Values {
		traj := b.Trajectories[i]
		for j := range row.Rewards {
			want := -beta * (float64(traj.Logprobs[j]) - float64(ref[i][j]))
			if j == len(row.Rewards)-1 {
				want += b.Rewards[i].Total
			}
			if math.Abs(row.Rewards[j]-want) > 1e-12 {
				t.Fatalf("sample %d of %q token %d: reward %.15g, want %.15g", traj.SampleIndex, traj.PromptID, j, row.Rewards[j], want)
			}
			moved = moved || math.Abs(float64(traj.Logprobs[j])-float64(ref[i][j])) > 1e-3
		}
	}
	if !moved {
		t.Fatal("the sampler's logprobs equal the base model's: the test checks nothing")
	}
}
