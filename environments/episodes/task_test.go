package episodes_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/environments/episodes"
	"github.com/rlpipe/rlpipe/environments/guess"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// bisector plays guess-the-number by bisection, as a model with a byte
// tokenizer and a chat template would return it: prompt token ids
// (role marker, content bytes, end token per message, then the
// assistant's marker) and reply token ids (bytes, end token). Its first
// guess depends on the request seed, so that episodes of a group differ.
type bisector struct{}

func render(msgs []policy.Message) []int32 {
	var ids []int32
	for _, m := range msgs {
		role := int32(1)
		if m.Role == "assistant" {
			role = 2
		}
		ids = append(ids, role)
		for _, b := range []byte(m.Content) {
			ids = append(ids, 10+int32(b))
		}
		ids = append(ids, 0)
	}
	return append(ids, 2)
}

func (bisector) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		lo, hi := 1, 100
		guess := 0
		for _, m := range r.Messages {
			switch {
			case m.Role == "assistant":
				guess, _ = strconv.Atoi(m.Content)
			case m.Content == "higher":
				lo = guess + 1
			case m.Content == "lower":
				hi = guess - 1
			}
		}
		next := (lo + hi) / 2
		if guess == 0 {
			next = lo + int(uint64(r.Seed)%uint64(hi-lo+1)) // a seeded first guess
		}
		text := strconv.Itoa(next)
		var ids []int32
		var lps []float32
		for _, b := range []byte(text) {
			ids, lps = append(ids, 10+int32(b)), append(lps, -0.5)
		}
		ids, lps = append(ids, 0), append(lps, -0.1)
		out[i] = []policy.Sample{{RequestID: r.ID, Text: text, TokenIDs: ids, Logprobs: lps, FinishReason: policy.FinishStop,
			Prompt: &policy.PromptLogprobs{TokenIDs: render(r.Messages)}, Status: policy.StatusOK}}
	}
	return out, nil
}

func setup(t *testing.T) (artifacts.Store, pipeline.Artifact) {
	t.Helper()
	st := standintest.NewStore(t, 0)
	rows := []tables.Prompt{{PromptID: "g1", Prompt: "play", Answer: "-"}, {PromptID: "g2", Prompt: "play", Answer: "-"}, {PromptID: "g3", Prompt: "play", Answer: "-"}}
	if _, err := datasets.Put(context.Background(), st, "main", "data/games.parquet", rows, nil); err != nil {
		t.Fatal(err)
	}
	return st, pipeline.StoreArtifact("main", "data/games.parquet")
}

// runEpisodes runs o's task on prompts as iteration 1 of run name and
// returns the bytes of its trajectories, or the call's error.
func runEpisodes(t *testing.T, st artifacts.Store, prompts pipeline.Artifact, name string, o episodes.Options) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	task, err := episodes.Task(o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: name, Seed: 5, NoCache: true, WorkDir: t.TempDir(),
		Envs: map[string]pipeline.Settings{"generate": {}}, Machine: &pipeline.Machine{CPU: 2, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := r.Iteration(1).Go(ctx, task, pipeline.Call{Inputs: map[string]pipeline.Artifact{pipeline.OutPrompts: prompts}, Params: map[string]int{"iteration": 1}})
	if err := n.Wait(ctx); err != nil {
		return nil, err
	}
	art, err := n.Result(pipeline.OutTrajectories)
	if err != nil {
		return nil, err
	}
	return standintest.Read(t, st, art.Ref, art.Path), nil
}

// trajectories is the table in b; an error fails the test.
func trajectories(t *testing.T, b []byte) []tables.Trajectory {
	t.Helper()
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), "trajectories", tables.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func guessEnv(tables.Prompt) (environments.Env, error) { return guess.New(nil), nil }

// G episodes per prompt, in (prompt, episode) order, each played to the
// end with its exact token sequence and mask; the same seed gives the same
// bytes on a second run.
func TestEpisodesTask(t *testing.T) {
	st, prompts := setup(t)
	o := episodes.Options{Policy: bisector{}, Identity: "bisector", EnvName: "guess", Make: guessEnv, Episodes: 4, Concurrency: 3,
		Runner: environments.RunnerOptions{MaxTurns: 10, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}}
	b, err := runEpisodes(t, st, prompts, "a", o)
	if err != nil {
		t.Fatal(err)
	}
	rows := trajectories(t, b)
	if len(rows) != 12 {
		t.Fatalf("%d rows, want 3 prompts × 4 episodes", len(rows))
	}
	firsts := map[string]bool{}
	for i, r := range rows {
		if r.PromptID != []string{"g1", "g2", "g3"}[i/4] || r.SampleIndex != int32(i%4) || r.GroupID != "000001-"+r.PromptID {
			t.Errorf("row %d: %s #%d group %s", i, r.PromptID, r.SampleIndex, r.GroupID)
		}
		if r.Status != tables.StatusOK || r.Turns[len(r.Turns)-1].Content != guess.Correct || r.PolicyVersion != "bisector" {
			t.Errorf("row %d: status %s, last turn %q, version %q", i, r.Status, r.Turns[len(r.Turns)-1].Content, r.PolicyVersion)
		}
		if r.Sequence == nil || len(r.Sequence) != len(r.Trainable) {
			t.Fatalf("row %d has no exact sequence", i)
		}
		var policyTokens []int32
		for k, m := range r.Trainable {
			if m == 1 {
				policyTokens = append(policyTokens, r.Sequence[k])
			}
		}
		if !slices.Equal(policyTokens, r.TokenIDs) {
			t.Errorf("row %d: masked tokens %v, replies %v", i, policyTokens, r.TokenIDs)
		}
		firsts[r.PromptID+"/"+r.Turns[1].Content] = true
	}
	if len(firsts) < 6 {
		t.Errorf("the episodes of a group should differ in their samples: first guesses %v", firsts)
	}
	again, err := runEpisodes(t, st, prompts, "b", o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Error("a second run with the same seed wrote other bytes")
	}
}

type brokenEnv struct{}

func (brokenEnv) Reset(ctx context.Context, id string) (string, error) { return "start", nil }
func (brokenEnv) Step(ctx context.Context, a string) (environments.Step, error) {
	return environments.Step{}, errors.New("the simulator crashed")
}
func (brokenEnv) End() error { return nil }

// An environment that fails on a step gives its episode env_error and the
// others go on; one that cannot be made fails the task, naming the prompt.
func TestEpisodesFaults(t *testing.T) {
	st, prompts := setup(t)
	mk := func(p tables.Prompt) (environments.Env, error) {
		if p.PromptID == "g2" {
			return brokenEnv{}, nil
		}
		return guess.New(nil), nil
	}
	o := episodes.Options{Policy: bisector{}, Identity: "bisector", EnvName: "mixed", Make: mk, Episodes: 2,
		Runner: environments.RunnerOptions{MaxTurns: 3, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}}
	b, err := runEpisodes(t, st, prompts, "faults", o)
	if err != nil {
		t.Fatal(err)
	}
	rows := trajectories(t, b)
	for _, r := range rows {
		switch {
		case r.PromptID == "g2":
			if r.Status != tables.StatusEnvError || r.Error == nil || !strings.Contains(*r.Error, "the simulator crashed") {
				t.Errorf("g2: %s %v", r.Status, r.Error)
			}
		case r.Status != tables.StatusOK && r.Status != tables.StatusTruncated:
			t.Errorf("%s #%d: %s", r.PromptID, r.SampleIndex, r.Status)
		}
	}
	o.Make = func(p tables.Prompt) (environments.Env, error) { return nil, errors.New("no world for it") }
	_, err = runEpisodes(t, st, prompts, "nomaker", o)
	if err == nil || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), "environment mixed for prompt g1: no world for it") {
		t.Errorf("a maker that fails: %v", err)
	}
}

// The token budget and token-in/token-out enter the task's version, so a
// cached table played under another budget (or none), or sent otherwise,
// is not reused; left unset they leave the version as it was before they
// existed.
func TestEpisodesVersion(t *testing.T) {
	m, err := tiny.EmbeddedChain()
	if err != nil {
		t.Fatal(err)
	}
	version := func(budget int, r environments.Renderer) string {
		t.Helper()
		task, err := episodes.Task(episodes.Options{Policy: bisector{}, Identity: "bisector", EnvName: "guess", Make: guessEnv, Episodes: 4,
			Runner: environments.RunnerOptions{MaxTurns: 10, MaxEpisodeTokens: budget, Renderer: r, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return task.Version
	}
	none, small, large, tokenIn := version(0, nil), version(64, nil), version(65, nil), version(0, m)
	if none == small || small == large || none == large || tokenIn == none || tokenIn == small {
		t.Errorf("versions without a budget, with 64 and with 65 tokens, token-in: %s %s %s %s", none, small, large, tokenIn)
	}
	// Unset, the fields are left out of the hash: the version is the one
	// tasks had before they existed, under the current code version
	// (episodes-1-64c755e2a0cabb3c under episodes-1).
	if want := "episodes-2-46d976fb5515077e"; none != want {
		t.Errorf("without a budget or token-in the version is %s, want %s as before they existed", none, want)
	}
}

// endCounter counts the Reset and End calls of each environment a maker
// made, by the order they were made in.
type endCounter struct {
	mu           sync.Mutex
	resets, ends []int
}

// maker makes guess environments that count their End calls; the one
// made as number failAt (1-based; 0: none) is refused.
func (c *endCounter) maker(failAt int) episodes.Maker {
	return func(tables.Prompt) (environments.Env, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.ends)+1 == failAt {
			return nil, errors.New("no world for it")
		}
		c.resets, c.ends = append(c.resets, 0), append(c.ends, 0)
		return &countedEnv{Env: guess.New(nil), c: c, i: len(c.ends) - 1}, nil
	}
}

func (c *endCounter) counts() (resets, ends []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.resets), slices.Clone(c.ends)
}

type countedEnv struct {
	environments.Env
	c *endCounter
	i int
}

func (e *countedEnv) Reset(ctx context.Context, id string) (string, error) {
	e.c.mu.Lock()
	e.c.resets[e.i]++
	e.c.mu.Unlock()
	return e.Env.Reset(ctx, id)
}

func (e *countedEnv) End() error {
	e.c.mu.Lock()
	e.c.ends[e.i]++
	e.c.mu.Unlock()
	return e.Env.End()
}

// downPolicy fails every Generate: the whole call fails (the policy's
// server is gone), not one episode.
type downPolicy struct{}

func (downPolicy) Generate(context.Context, []policy.Request, policy.Sampling) ([][]policy.Sample, error) {
	return nil, errors.New("the policy server is down")
}

// Every environment the maker made is ended exactly once, also those
// whose episodes never ran: a later one could not be made, or an
// earlier episode failed the call (the episodes after it, one at a
// time here, are not even reset).
func TestEpisodesEndEveryEnv(t *testing.T) {
	st, prompts := setup(t)
	for _, c := range []struct {
		name   string
		policy policy.Policy
		failAt int
		want   string // the call's error
		resets []int
	}{
		{"a later environment cannot be made", bisector{}, 5,
			"episodes: environment counted for prompt g3: no world for it", []int{0, 0, 0, 0}},
		{"the first episode fails the call", downPolicy{}, 0,
			"episodes of iteration 1: episode g1 turn 0: generate: the policy server is down", []int{1, 0, 0, 0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n endCounter
			o := episodes.Options{Policy: c.policy, Identity: "p", EnvName: "counted", Make: n.maker(c.failAt), Episodes: 2, Concurrency: 1,
				Runner: environments.RunnerOptions{MaxTurns: 3, Sampling: policy.Sampling{MaxTokens: 4, Temperature: 1}}}
			_, err := runEpisodes(t, st, prompts, strings.ReplaceAll(c.name, " ", "-"), o)
			if want := "task generate (iteration 000001) failed after 1 attempt(s): " + c.want; err == nil || err.Error() != want {
				t.Errorf("the call: %v\nwant %s", err, want)
			}
			resets, ends := n.counts()
			if want := slices.Repeat([]int{1}, len(c.resets)); !slices.Equal(ends, want) {
				t.Errorf("End calls per environment made %v, want %v", ends, want)
			}
			if !slices.Equal(resets, c.resets) {
				t.Errorf("Reset calls per environment made %v, want %v", resets, c.resets)
			}
		})
	}
}
