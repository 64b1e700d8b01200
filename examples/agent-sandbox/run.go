package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
	_ "github.com/rlpipe/rlpipe/artifacts/local" // the embedded store
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/rewards/judge"
	"github.com/rlpipe/rlpipe/sandbox"
)

// The reward: the verifier's pass (1) or fail (0), and the judge's grade of
// the final message, weighted.
const (
	weightVerifier = 0.8
	weightJudge    = 0.2
	judgeName      = "judge"
	storeDir       = "agent-sandbox/"
)

// task is one line of tasks.jsonl: an agent.Task.
type task struct {
	ID          string `json:"id"`
	Instruction string `json:"instruction"`
	// Protected are paths of the world the agent must not change; a change
	// scores 0 (tampered) before anything runs.
	Protected []string `json:"protected,omitempty"`
	// Run, optional, executes the agent's work after its final answer;
	// the verifier reads what it printed at /candidate.
	Run string `json:"run,omitempty"`
	// Checks are files only the verifier sees, at /check/NAME.
	Checks map[string]string `json:"checks,omitempty"`
	// Verifier is a bash script run on the episode's final workspace. It
	// writes pass or fail to $RLPIPE_VERDICT, or passes by exiting 0; it
	// never runs the workspace's code (that is Run's job).
	Verifier string `json:"verifier"`
}

// agentTask is t as the environment takes it.
func (t task) agentTask() agent.Task {
	at := agent.Task{Instruction: t.Instruction, Protected: t.Protected, Run: t.Run, Verifier: t.Verifier}
	if len(t.Checks) > 0 {
		at.Checks = map[string][]byte{}
		for name, text := range t.Checks {
			at.Checks[name] = []byte(text)
		}
	}
	return at
}

// report is what a run produced, for the caller and the test.
type report struct {
	Trajectories []tables.Trajectory
	Episodes     []episode // in row order
	Rewards      []tables.Reward
	Commit       artifacts.Commit
}

// episode is what the trajectories table does not hold of an episode.
type episode struct {
	Turns int // policy replies
	// Verifier is the verifier's reward, status, verdict and what it
	// printed (and the Run phase's status, the tampered paths), from the
	// runner's Result.Info; nil when the episode did not reach it.
	Verifier map[string]any
	Reward   float64
}

// run plays cfg.Samples episodes of every task, scores them, commits the
// tables and prints a summary to out.
func run(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	if cfg.Samples < 1 || cfg.MaxTurns < 1 || cfg.Concurrency < 1 {
		return nil, fmt.Errorf("--samples, --max-turns and --concurrency must be at least 1")
	}
	if err := sandbox.Available(); err != nil {
		return nil, fmt.Errorf("the bubblewrap sandbox does not start here: %w\n"+
			"install it with `sudo apt-get install bubblewrap` (or `bash scripts/deps.sh` in the rlpipe repository)", err)
	}
	if cfg.Endpoint != "" && cfg.Model == "" {
		return nil, fmt.Errorf("--endpoint needs --model, the name the server serves (e.g. Qwen/Qwen2.5-7B-Instruct; GET %s/v1/models lists them)", shown(cfg.Endpoint))
	}
	tasks, err := loadTasks(cfg.Tasks)
	if err != nil {
		return nil, err
	}
	world, err := buildWorld(ctx, cfg)
	if err != nil {
		return nil, err
	}

	// The stand-in serves whatever is not pointed elsewhere: the policy, the
	// judge, or both. The example always speaks HTTP.
	policyURL, policyKey, judgeURL := cfg.Endpoint, "", cfg.JudgeURL
	judgeModel, judgeKeyEnv := cfg.JudgeModel, cfg.JudgeKeyEnv
	if policyURL == "" || judgeURL == "" {
		base, stop, err := serveStandin(&standin{seed: cfg.Seed, tasks: tasks}, "")
		if err != nil {
			return nil, err
		}
		defer stop()
		if policyURL == "" {
			policyURL = base
			if cfg.Model == "" {
				cfg.Model = standinModel
			}
		}
		if judgeURL == "" {
			judgeURL, judgeModel, judgeKeyEnv = base+"/judge/v1", standinModel, ""
		}
	}
	if judgeModel == "" {
		judgeModel = cfg.Model
	}
	if judgeKeyEnv == "" && cfg.JudgeURL != "" {
		judgeKeyEnv = cfg.KeyEnv
	}
	if cfg.KeyEnv != "" {
		if policyKey = os.Getenv(cfg.KeyEnv); policyKey == "" {
			return nil, fmt.Errorf("--key-env %s: $%s is not set: export the API key in it", cfg.KeyEnv, cfg.KeyEnv)
		}
	}
	client, err := openai.New(&openai.Options{Endpoints: []string{policyURL}, Model: cfg.Model, APIKey: policyKey, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	grader, err := judge.New(judge.Config{Name: judgeName, BaseURL: v1(judgeURL), Model: judgeModel,
		APIKeyEnv: judgeKeyEnv, Rubric: judgeRubric, MaxTokens: 512}, nil)
	if err != nil {
		return nil, err
	}

	printf(out, "agent-sandbox: %d tasks × %d samples in world %s (%s)\n", len(tasks), cfg.Samples, world.Name, world.Digest[:19])
	printf(out, "policy %s at %s%s\n", cfg.Model, shown(policyURL), standinNote(cfg.Endpoint == "", "a scripted agent, not a model"))
	printf(out, "judge  %s at %s%s\n", judgeModel, shown(judgeURL), standinNote(cfg.JudgeURL == "", "a rule, not a model"))

	rep, err := rollout(ctx, cfg, client, world, tasks)
	if err != nil {
		return nil, err
	}
	if err := finished(rep, shown(policyURL)); err != nil {
		return nil, err
	}
	if err := score(ctx, grader, tasks, rep); err != nil {
		return nil, err
	}
	who := fmt.Sprintf("%s at %s", cfg.Model, shown(policyURL))
	if cfg.Endpoint == "" {
		who = "the STAND-IN scripted agent"
	}
	rep.Commit, err = commit(ctx, cfg, rep, who)
	if err != nil {
		return nil, err
	}
	summarize(out, cfg, tasks, rep)
	return rep, nil
}

// finished fails a run in which no episode finished: the policy server is
// most likely down or misnamed, and there is nothing worth committing.
func finished(rep *report, server string) error {
	counts := map[string]int{}
	for _, tr := range rep.Trajectories {
		if tr.Status == tables.StatusOK {
			return nil
		}
		counts[tr.Status]++
	}
	err := fmt.Errorf("no episode finished (%v); the first failed with: %s", counts, deref(rep.Trajectories[0].Error))
	if counts[tables.StatusInfraError] > 0 {
		err = fmt.Errorf("%w\ncheck that the policy server at %s is up and serves --model", err, server)
	}
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func standinNote(standin bool, what string) string {
	if standin {
		return "  [STAND-IN: " + what + "]"
	}
	return ""
}

// shown is a URL without user info or query, which may carry a secret.
func shown(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// v1 gives a judge API root its /v1, as the policy client does.
func v1(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		return base
	}
	return base + "/v1"
}

func loadTasks(path string) ([]task, error) {
	var (
		b   []byte
		err error
	)
	if path == "" {
		path = "tasks.jsonl (built in)"
		b, err = embedded.ReadFile("tasks.jsonl")
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	var tasks []task
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1) // the file is in memory: no line is too long
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var t task
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if t.ID == "" || t.Instruction == "" || t.Verifier == "" || seen[t.ID] {
			return nil, fmt.Errorf("%s:%d: a task needs a unique id, an instruction and a verifier", path, line)
		}
		seen[t.ID] = true
		tasks = append(tasks, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tasks %s: %w", path, err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return tasks, nil
}

// buildWorld builds the world once into the cache; later runs find it by
// its digest.
func buildWorld(ctx context.Context, cfg config) (*agent.World, error) {
	cache, err := agent.NewCache(cfg.WorldCache)
	if err != nil {
		return nil, err
	}
	spec := agent.WorldSpec{Name: "agent-sandbox", Source: cfg.World}
	if cfg.World == "" {
		spec.Files = map[string][]byte{}
		err := fs.WalkDir(embedded, "world", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := embedded.ReadFile(p)
			spec.Files[strings.TrimPrefix(p, "world/")] = b
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return cache.World(ctx, spec)
}

// rollout runs every episode, at most cfg.Concurrency at a time, each with
// its own Env and so its own workspace, and returns the rows in (task,
// sample) order.
func rollout(ctx context.Context, cfg config, p policy.Policy, world *agent.World, tasks []task) (*report, error) {
	runner, err := environments.NewRunner(p, &environments.RunnerOptions{
		MaxTurns: cfg.MaxTurns, Timeout: cfg.Timeout, Seed: cfg.Seed,
		Sampling: policy.Sampling{Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens},
	})
	if err != nil {
		return nil, err
	}
	n := len(tasks) * cfg.Samples
	rep := &report{Trajectories: make([]tables.Trajectory, n), Episodes: make([]episode, n)}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	for i := range n {
		t, sample := tasks[i/cfg.Samples], i%cfg.Samples
		g.Go(func() error {
			env, err := agent.NewEnv(world, t.agentTask(), nil)
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			res, err := runner.Run(gctx, env, environments.Episode{ID: t.ID, SampleIndex: int32(sample)})
			if err != nil {
				return fmt.Errorf("task %s sample %d: %w", t.ID, sample, err)
			}
			ep := episode{Turns: len(res.StepRewards), Reward: res.Reward}
			if st, ok := res.Info["verifier_status"]; ok {
				ep.Verifier = map[string]any{"reward": res.Reward, "status": st}
				for key, info := range map[string]string{"exit_code": "verifier_exit_code", "stdout": "verifier_stdout",
					"verdict": "verifier_verdict", "reason": "verifier_reason", "tampered": "tampered",
					"run_status": "run_status", "run_exit_code": "run_exit_code"} {
					if v, ok := res.Info[info]; ok {
						ep.Verifier[key] = v
					}
				}
			}
			rep.Trajectories[i], rep.Episodes[i] = res.Trajectory, ep
			return nil
		})
	}
	return rep, g.Wait()
}

// score writes one rewards row per trajectory: r_verifier from the
// episode (the reward the verifier left in the runner's result), r_judge
// from the judge. An episode that did not finish is skipped, as the
// rewards stage does, never scored 0.
func score(ctx context.Context, grader *judge.Judge, tasks []task, rep *report) error {
	digest := specDigest(tasks)
	rep.Rewards = make([]tables.Reward, len(rep.Trajectories))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, tr := range rep.Trajectories {
		t := tasks[i/(len(rep.Trajectories)/len(tasks))] // rows are in (task, sample) order
		g.Go(func() error {
			r := tables.Reward{PromptID: tr.PromptID, SampleIndex: tr.SampleIndex, SpecDigest: digest, Total: math.NaN(),
				VerifierOutputs: "{}", JudgeOutputs: "{}", Status: "ok"}
			defer func() { rep.Rewards[i] = r }()
			if tr.Status != tables.StatusOK {
				r.Status, r.Error = "skipped: "+tr.Status, tr.Error
				return nil
			}
			ep := rep.Episodes[i]
			if ep.Verifier == nil {
				msg := "component verifier: the episode ended without the verifier's verdict"
				r.Status, r.Error = "error", &msg
				return nil
			}
			rv := ep.Reward
			r.Components = map[string]float64{"verifier": rv}
			vo, err := json.Marshal(map[string]any{"verifier": ep.Verifier})
			if err != nil {
				msg := "verifier outputs: " + err.Error()
				r.Status, r.Error = "error", &msg
				return nil
			}
			r.VerifierOutputs = string(vo)
			res, err := grader.Score(gctx, judge.Input{Prompt: t.Instruction, Completion: tr.Completion}, nil)
			if errors.Is(err, judge.ErrSetup) || gctx.Err() != nil {
				return fmt.Errorf("judge %s sample %d: %w", tr.PromptID, tr.SampleIndex, err)
			}
			// As in the rewards stage, the judge's own failure (a NaN score
			// is out of range) is the row's error rather than the encoding
			// error it causes; outputs that do not encode stay "{}".
			jo, encErr := json.Marshal(map[string]any{judgeName: map[string]any{"score": res.Score, "status": res.Status, "reason": res.Reason, "raw": res.Raw}})
			if encErr == nil {
				r.JudgeOutputs = string(jo)
			}
			if res.Status != judge.StatusOK {
				msg := fmt.Sprintf("component judge: %s: %s", res.Status, res.Reason)
				r.Status, r.Error = "error", &msg
				return nil
			}
			if encErr != nil {
				msg := "judge outputs: " + encErr.Error() + " (the judge returned a value JSON cannot hold)"
				r.Status, r.Error = "error", &msg
				return nil
			}
			r.Components["judge"] = res.Score
			r.Total = weightVerifier*rv + weightJudge*res.Score
			return nil
		})
	}
	return g.Wait()
}

// specDigest names the reward definition: weights, rubric and each task's
// judgement (verifier, run, protected paths, checks).
func specDigest(tasks []task) string {
	h := sha256.New()
	fmt.Fprintf(h, "agent-sandbox reward v2\n%g %g\n%s\n", weightVerifier, weightJudge, judgeRubric)
	for _, t := range tasks {
		fmt.Fprintf(h, "%q %q %q %q\n", t.ID, t.Verifier, t.Run, t.Protected)
		for _, name := range slices.Sorted(maps.Keys(t.Checks)) {
			fmt.Fprintf(h, "check %q %q\n", name, t.Checks[name])
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// commit writes both tables to the branch and commits them.
func commit(ctx context.Context, cfg config, rep *report, policyName string) (artifacts.Commit, error) {
	store, err := artifacts.Open(ctx, cfg.Store, nil)
	if errors.Is(err, artifacts.ErrRepositoryNotFound) {
		store, err = artifacts.Create(ctx, cfg.Store, nil)
	}
	if err != nil {
		return artifacts.Commit{}, err
	}
	defer store.Close()
	if _, err := store.GetBranch(ctx, cfg.Branch); errors.Is(err, artifacts.ErrBranchNotFound) {
		repo, err := store.Repository(ctx)
		if err != nil {
			return artifacts.Commit{}, err
		}
		if _, err := store.CreateBranch(ctx, cfg.Branch, repo.DefaultBranch); err != nil {
			return artifacts.Commit{}, err
		}
	} else if err != nil {
		return artifacts.Commit{}, err
	}
	rewardsTable, err := tables.RewardsWith("verifier", "judge")
	if err != nil {
		return artifacts.Commit{}, err
	}
	var tb, rb bytes.Buffer
	if err := tables.Write(&tb, tables.Trajectories, rep.Trajectories, nil); err != nil {
		return artifacts.Commit{}, fmt.Errorf("write trajectories: %w", err)
	}
	if err := tables.Write(&rb, rewardsTable, rep.Rewards, nil); err != nil {
		return artifacts.Commit{}, fmt.Errorf("write rewards: %w", err)
	}
	for name, b := range map[string]*bytes.Buffer{"trajectories.parquet": &tb, "rewards.parquet": &rb} {
		if _, err := store.PutObject(ctx, cfg.Branch, storeDir+name, b, nil); err != nil {
			return artifacts.Commit{}, err
		}
	}
	msg := fmt.Sprintf("agent-sandbox: %d episodes of %d tasks by %s, scored by verifier and judge",
		len(rep.Trajectories), len(rep.Trajectories)/cfg.Samples, policyName)
	return store.Commit(ctx, cfg.Branch, msg, &artifacts.CommitOptions{AllowEmpty: true,
		Metadata: map[string]string{"samples": fmt.Sprint(cfg.Samples), "seed": fmt.Sprint(cfg.Seed), "max_turns": fmt.Sprint(cfg.MaxTurns)}})
}

func summarize(out io.Writer, cfg config, tasks []task, rep *report) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "task\tmean reward\tsuccesses\tmean turns\tstatuses")
	for ti, t := range tasks {
		var sum, scored, ok, turns float64
		statuses := map[string]int{}
		for s := range cfg.Samples {
			i := ti*cfg.Samples + s
			statuses[rep.Trajectories[i].Status]++
			turns += float64(rep.Episodes[i].Turns)
			if r := rep.Rewards[i]; r.Status == "ok" {
				sum, scored = sum+r.Total, scored+1
			}
			if rep.Rewards[i].Components["verifier"] == 1 {
				ok++
			}
		}
		var st []string
		for _, s := range tables.Statuses {
			if statuses[s] > 0 {
				st = append(st, fmt.Sprintf("%s %d", s, statuses[s]))
			}
		}
		mean := "-"
		if scored > 0 {
			mean = fmt.Sprintf("%.2f", sum/scored)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.1f\t%s\n", t.ID, mean, int(ok), cfg.Samples, turns/float64(cfg.Samples), strings.Join(st, ", "))
	}
	tw.Flush()
	printf(out, "reward = %g·r_verifier + %g·r_judge, the mean over scored episodes\n", weightVerifier, weightJudge)
	printf(out, "store %s  branch %s  commit %s\n", cfg.Store, cfg.Branch, rep.Commit.ID)
	printf(out, "  %strajectories.parquet  %d rows\n  %srewards.parquet       %d rows (r_verifier, r_judge)\n",
		storeDir, len(rep.Trajectories), storeDir, len(rep.Rewards))
}
