package rollouts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
)

// Version is the rollout code's version; it enters every rollout task's
// cache key, so bump it when the way trajectories are written changes.
const Version = "rollout-1"

// Options configure a rollout task.
type Options struct {
	// Policy generates the samples. It is shared by every call of the
	// task, so it must be safe for concurrent use.
	Policy policy.Policy
	// Identity names the policy for the cache key and the trajectories'
	// policy_version: the base model and where it runs ("tiny-arith@ab12…",
	// "Qwen/Qwen2.5-0.5B-Instruct"). A different identity is different work.
	Identity string
	// Sampling is the sampling of every request; Sampling.Adapter is set
	// per call from the policy input.
	Sampling policy.Sampling
	// Batch is how many prompts go to the policy in one Generate call
	// (default 64): large enough to batch on the embedded model, small
	// enough that cancellation is prompt.
	Batch int
	// AdapterRoot, when set, is a directory the policy's server can read
	// (a shared mount for a remote vLLM): each adapter is copied to
	// AdapterRoot/<name> before it is loaded. Empty loads the adapter from
	// the task's scratch copy, which suits servers that read the adapter
	// when it is loaded (vLLM, `rlpipe policy serve`) on this machine.
	AdapterRoot string
	// KeepAdapters is how many adapters stay loaded (default 3): older ones
	// are unloaded when a new one arrives.
	KeepAdapters int
	// Env is the task environment (default "generate").
	Env string
}

// Params are the loop's parameters of a generate call.
type Params struct {
	Iteration       int `json:"iteration"`
	PolicyIteration int `json:"policy_iteration"`
	Staleness       int `json:"staleness"`
}

// Task returns the generate stage: it reads the prompts input and, when
// present, the policy input (a PEFT adapter directory), samples
// Sampling.N completions per prompt, and writes the trajectories table,
// one row per sample in (prompt, sample index) order, with each sample's
// status, policy version and seed. A sample that could not be generated
// is a row with a non-ok status and its error, never an empty success.
func Task(o Options) (*pipeline.Task, error) {
	if o.Policy == nil {
		return nil, errors.New("rollouts: no policy")
	}
	if err := policy.Validate(nil, o.Sampling); err != nil {
		return nil, fmt.Errorf("rollouts: %w", err)
	}
	if o.Batch <= 0 {
		o.Batch = 64
	}
	if o.KeepAdapters <= 0 {
		o.KeepAdapters = 3
	}
	if o.Env == "" {
		o.Env = "generate"
	}
	g := &generator{o: o, adapters: NewAdapters(o.Policy, o.Identity, o.AdapterRoot, o.KeepAdapters)}
	return &pipeline.Task{
		Name:    "generate",
		Version: g.version(),
		Env:     o.Env,
		Outputs: []pipeline.Output{{Name: pipeline.OutTrajectories, File: "trajectories.parquet",
			Check: func(path string) error { return tables.CheckFile(path, tables.Trajectories) }}},
		Run: g.run,
	}, nil
}

// generator holds what calls of one rollout task share: which adapters
// the policy has loaded.
type generator struct {
	o        Options
	adapters *Adapters
}

// version is the task's cache version: the code, the policy's identity and
// the sampling parameters.
func (g *generator) version() string {
	s := g.o.Sampling
	s.Adapter = ""
	b, _ := json.Marshal(struct {
		Code, Identity string
		Sampling       policy.Sampling
	}{Version, g.o.Identity, s})
	sum := sha256.Sum256(b)
	return Version + "-" + hex.EncodeToString(sum[:8])
}

func (g *generator) run(ctx context.Context, tc *pipeline.TaskContext) error {
	var p Params
	if err := tc.Params(&p); err != nil {
		return err
	}
	prompts, err := readPrompts(tc.InputPath("prompts"))
	if err != nil {
		return pipeline.Permanent(err)
	}
	s := g.o.Sampling
	version := g.o.Identity
	if dir := tc.InputPath("policy"); dir != "" {
		name, err := g.adapters.Load(ctx, dir)
		if err != nil {
			return err
		}
		s.Adapter = name
		version += "+" + name
	}
	n := s.Samples()
	rows := make([]tables.Trajectory, 0, len(prompts)*n)
	sampler := s
	sampler.Adapter = ""
	samplerJSON := sampler.JSON()
	for start := 0; start < len(prompts); start += g.o.Batch {
		batch := prompts[start:min(start+g.o.Batch, len(prompts))]
		reqs := make([]policy.Request, len(batch))
		for i, pr := range batch {
			reqs[i] = Request(pr, tc.Seed)
		}
		out, err := g.o.Policy.Generate(ctx, reqs, s)
		if err != nil {
			if errors.Is(err, policy.ErrAdapterNotLoaded) {
				// A server that restarted forgot its adapters: load again
				// on the next attempt.
				g.adapters.Forget(s.Adapter)
			}
			return fmt.Errorf("generate iteration %d: %w", p.Iteration, err)
		}
		if len(out) != len(reqs) {
			return fmt.Errorf("generate: the policy returned %d results for %d prompts", len(out), len(reqs))
		}
		for i, samples := range out {
			if len(samples) != n {
				return fmt.Errorf("generate: the policy returned %d samples for prompt %q, want %d", len(samples), reqs[i].ID, n)
			}
			for j, smp := range samples {
				rows = append(rows, Row(smp, reqs[i], j, p, version, samplerJSON))
			}
		}
	}
	return writeTrajectories(tc.OutputPath(pipeline.OutTrajectories), rows)
}

// Request is the policy request of a prompt: its chat messages when it has
// them, else its text; seeded from the task seed and the prompt id so a
// prompt samples the same way whatever batch it lands in.
func Request(pr tables.Prompt, taskSeed uint64) policy.Request {
	r := policy.Request{ID: pr.PromptID, Seed: policy.RequestSeed(int64(taskSeed), pr.PromptID)}
	if len(pr.Messages) > 0 {
		for _, m := range pr.Messages {
			r.Messages = append(r.Messages, policy.Message{Role: m.Role, Content: m.Content})
		}
	} else {
		r.Prompt = pr.Prompt
	}
	return r
}

// Row is the trajectories row of sample j of a request.
func Row(s policy.Sample, req policy.Request, j int, p Params, version, sampler string) tables.Trajectory {
	status := s.Status
	if status == "" {
		status = tables.StatusOK
	}
	if s.PolicyVersion != "" {
		version = s.PolicyVersion
	}
	t := tables.Trajectory{
		PromptID: req.ID, SampleIndex: int32(j), GroupID: fmt.Sprintf("%06d-%s", p.Iteration, req.ID),
		Completion: s.Text, TokenIDs: s.TokenIDs, Logprobs: s.Logprobs, FinishReason: s.FinishReason,
		NumTokens: int32(len(s.TokenIDs)), PolicyVersion: version, Sampler: sampler, Seed: req.Seed,
		Staleness: int32(p.Staleness), Status: status,
	}
	if t.TokenIDs == nil {
		t.NumTokens = int32(len(s.Text))
	}
	if status != tables.StatusOK {
		e := s.Error
		if e == "" {
			e = "the policy returned no text"
		}
		t.Error = &e
	}
	return t
}

// Adapters loads PEFT adapter directories into a policy by content digest
// and unloads old ones: what a rollout or evaluation task needs to sample
// from a checkpoint. It is safe for concurrent use.
type Adapters struct {
	policy   policy.Policy
	identity string
	root     string
	keep     int

	mu     sync.Mutex
	loaded map[string]int // adapter name → load sequence number
	seq    int
}

// NewAdapters returns a loader for p. root, when set, is a directory the
// policy's server can read: adapters are copied there before loading.
// keep (default 3) is how many adapters stay loaded.
func NewAdapters(p policy.Policy, identity, root string, keep int) *Adapters {
	if keep <= 0 {
		keep = 3
	}
	return &Adapters{policy: p, identity: identity, root: root, keep: keep, loaded: map[string]int{}}
}

// Load makes the adapter directory dir available to the policy and
// returns its name, "adapter-<12 hex of its content digest>", so the same
// adapter is loaded once however many tasks ask for it.
func (g *Adapters) Load(ctx context.Context, dir string) (string, error) {
	loader, ok := g.policy.(policy.AdapterLoader)
	if !ok {
		return "", pipeline.Permanent(fmt.Errorf("the policy input is an adapter, but policy %s cannot load adapters", g.identity))
	}
	digest, err := DirDigest(dir)
	if err != nil {
		return "", pipeline.Permanent(fmt.Errorf("read adapter %s: %w", dir, err))
	}
	name := "adapter-" + digest[:12]
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.loaded[name]; ok {
		return name, nil
	}
	path := dir
	if g.root != "" {
		path = filepath.Join(g.root, name)
		if err := copyDir(dir, path); err != nil {
			return "", fmt.Errorf("copy adapter to %s: %w", path, err)
		}
	}
	if err := loader.LoadAdapter(ctx, name, path); err != nil {
		if errors.Is(err, policy.ErrAdapterShape) {
			err = pipeline.Permanent(err)
		}
		return "", fmt.Errorf("load adapter %s: %w", name, err)
	}
	g.seq++
	g.loaded[name] = g.seq
	// Unload the oldest beyond keep; a failure only costs memory.
	for len(g.loaded) > g.keep {
		oldest, at := "", g.seq+1
		for n, s := range g.loaded {
			if s < at {
				oldest, at = n, s
			}
		}
		_ = loader.UnloadAdapter(ctx, oldest)
		delete(g.loaded, oldest)
		if g.root != "" {
			_ = os.RemoveAll(filepath.Join(g.root, oldest))
		}
	}
	return name, nil
}

// Forget drops name from the loaded set, so the next Load loads it again
// (a server that restarted has forgotten it).
func (g *Adapters) Forget(name string) {
	g.mu.Lock()
	delete(g.loaded, name)
	g.mu.Unlock()
}

// DirDigest is the SHA-256 of a directory's regular files: their slash
// paths and contents, in path order.
func DirDigest(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyDir copies src's regular files into dst (created), through a
// temporary directory renamed into place so a reader never sees half an
// adapter.
func copyDir(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil // content-addressed: already there
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".tmp-adapter-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, statErr := os.Stat(dst); statErr == nil {
			return nil // another call won the race with the same content
		}
		return err
	}
	return nil
}

func readPrompts(path string) ([]tables.Prompt, error) {
	if path == "" {
		return nil, errors.New("generate: no prompts input")
	}
	return tables.ReadFile(path, tables.Prompts)
}

func writeTrajectories(path string, rows []tables.Trajectory) error {
	return tables.WriteFile(path, tables.Trajectories, rows, nil)
}
