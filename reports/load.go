package reports

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Sample is one scored trajectory shown in a report.
type Sample struct {
	Iteration    int                `json:"iteration"`
	PromptID     string             `json:"prompt_id"`
	SampleIndex  int32              `json:"sample_index"`
	Prompt       string             `json:"prompt,omitempty"`
	Answer       string             `json:"answer,omitempty"`
	Completion   string             `json:"completion"`
	FinishReason string             `json:"finish_reason"`
	NumTokens    int32              `json:"num_tokens"`
	Total        float64            `json:"total"`
	Components   map[string]float64 `json:"components,omitempty"`
	// Turns are an episode's, each text clipped; none for a single-turn
	// sample.
	Turns []Turn `json:"turns,omitempty"`
}

// Turn is one turn of an episode in a report: a reply of an exact
// sequence has the number of tokens it was sampled as, trained on.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Tokens  *int   `json:"tokens,omitempty"`
}

// episodeTurns are t's turns for a report, nil for a single-turn sample.
func episodeTurns(t *tables.Trajectory) []Turn {
	if !t.IsEpisode() {
		return nil
	}
	replies := t.ReplyTokens()
	out := make([]Turn, 0, len(t.Turns))
	for _, tu := range t.Turns {
		x := Turn{Role: tu.Role, Content: clip(tu.Content, 300)}
		if tu.Role == "assistant" && len(replies) > 0 {
			n := replies[0]
			x.Tokens, replies = &n, replies[1:]
		}
		out = append(out, x)
	}
	return out
}

// IterationSamples are an iteration's best and worst scored samples.
type IterationSamples struct {
	Iteration int      `json:"iteration"`
	Best      []Sample `json:"best"`
	Worst     []Sample `json:"worst"`
}

// Run is what a report is made of, read from one ref.
type Run struct {
	Ref string `json:"ref"`
	// Commit is the commit the ref resolves to (a branch's head; staged
	// changes are read but are not part of it).
	Commit  artifacts.Commit   `json:"commit"`
	Health  []Health           `json:"health"`
	Evals   []Eval             `json:"evals"`
	Samples []IterationSamples `json:"samples"`
}

// LoadOptions tune Load. Nil means defaults.
type LoadOptions struct {
	Health *HealthOptions
	// SampleIterations is how many of the last iterations keep samples
	// (default 10; negative: none).
	SampleIterations int
	// SamplesPerSide is how many best and how many worst samples each of
	// them keeps (default 2).
	SamplesPerSide int
	// Concurrency bounds the iterations read at once (default 4).
	Concurrency int
	// Cache, when set, keeps what Load read of each iteration for the
	// next Load with it (see Cache).
	Cache *Cache
}

// Cache keeps the iterations Load has read, each under its number, the
// checksums of the files it was read from and the options that shape
// it, so that a report rewritten after every commit of a run (`rlpipe
// run` refreshes one) reads only what changed: the new iteration and
// the one that leaves the last SampleIterations. What Load returns is
// the same with a cache or without one. A Cache keeps the iterations
// of the last Load only; use it from one Load at a time.
type Cache struct {
	mu   sync.Mutex
	last map[string]cachedIteration // what the last Load used
	next map[string]cachedIteration // what the current Load uses
}

type cachedIteration struct {
	health  Health
	samples *IterationSamples
}

// cacheKey names what loadIteration reads and computes for iteration n:
// its files' checksums and the options it depends on.
func cacheKey(n int, files iterationFiles, keep bool, o LoadOptions) string {
	var b strings.Builder
	ho := o.Health.withDefaults()
	fmt.Fprintf(&b, "%d keep=%t pass=%v side=%d", n, keep, ho.PassThreshold, o.SamplesPerSide)
	if ho.Correct != nil {
		fmt.Fprintf(&b, " correct=%+v", *ho.Correct)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, " %s=%s", name, files[name])
	}
	return b.String()
}

// get is the iteration under key, read by this Load or the last.
func (c *Cache) get(key string) (cachedIteration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.next[key]
	if !ok {
		v, ok = c.last[key]
	}
	if ok {
		c.next[key] = v
	}
	return v, ok
}

func (c *Cache) put(key string, v cachedIteration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next[key] = v
}

// begin starts a Load; end keeps what it used, for the next.
func (c *Cache) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = map[string]cachedIteration{}
}

func (c *Cache) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.next = c.next, nil
}

func (o *LoadOptions) withDefaults() LoadOptions {
	var v LoadOptions
	if o != nil {
		v = *o
	}
	if v.SampleIterations == 0 {
		v.SampleIterations = 10
	}
	if v.SamplesPerSide <= 0 {
		v.SamplesPerSide = 2
	}
	if v.Concurrency <= 0 {
		v.Concurrency = 4
	}
	return v
}

// Load reads a run's iterations and evaluations at ref and computes its
// health. A ref without iterations is ErrNoIterations.
func Load(ctx context.Context, st artifacts.Store, ref string, opts *LoadOptions) (*Run, error) {
	o := opts.withDefaults()
	c, err := st.ResolveRef(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", ref, err)
	}
	iters, files, err := listIterations(ctx, st, ref)
	if err != nil {
		return nil, err
	}
	if len(iters) == 0 {
		return nil, fmt.Errorf("report %s: %w", ref, ErrNoIterations)
	}
	run := &Run{Ref: ref, Commit: c, Health: make([]Health, len(iters))}
	samples := make([]*IterationSamples, len(iters))
	if o.Cache != nil {
		o.Cache.begin()
		defer o.Cache.end()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	for i, n := range iters {
		keep := o.SampleIterations > 0 && i >= len(iters)-o.SampleIterations
		g.Go(func() error {
			var key string
			if o.Cache != nil {
				key = cacheKey(n, files[n], keep, o)
				if v, ok := o.Cache.get(key); ok {
					run.Health[i], samples[i] = v.health, v.samples
					return nil
				}
			}
			h, s, err := loadIteration(gctx, st, ref, n, files[n], keep, o)
			if err != nil {
				return err
			}
			run.Health[i], samples[i] = h, s
			if o.Cache != nil {
				o.Cache.put(key, cachedIteration{health: h, samples: s})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, s := range samples {
		if s != nil {
			run.Samples = append(run.Samples, *s)
		}
	}
	if run.Evals, err = runs.ReadEvals(ctx, st, ref); err != nil {
		return nil, err
	}
	return run, nil
}

// Iterations lists the iterations at ref that have a trajectories table,
// in order.
func Iterations(ctx context.Context, st artifacts.Store, ref string) ([]int, error) {
	iters, _, err := listIterations(ctx, st, ref)
	return iters, err
}

// iterationFiles are the checksums of an iteration's files, by file name.
type iterationFiles map[string]string

// listIterations is Iterations and the checksums of each iteration's
// files, from one listing.
func listIterations(ctx context.Context, st artifacts.Store, ref string) ([]int, map[int]iterationFiles, error) {
	var out []int
	files := map[int]iterationFiles{}
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: runs.IterationsPrefix}) {
		if err != nil {
			return nil, nil, fmt.Errorf("list %s:%s: %w", ref, runs.IterationsPrefix, err)
		}
		for _, in := range healthInputs {
			if n, ok := runs.InIteration(e.Path, in.file); ok {
				if files[n] == nil {
					files[n] = iterationFiles{}
				}
				files[n][in.file] = e.Checksum
				if in.file == runs.TrajectoriesFile {
					out = append(out, n)
				}
			}
		}
		if n, ok := runs.InIteration(e.Path, runs.HealthFile); ok {
			if files[n] == nil {
				files[n] = iterationFiles{}
			}
			files[n][runs.HealthFile] = e.Checksum
		}
	}
	slices.Sort(out)
	return slices.Compact(out), files, nil
}

// storedHealth is iteration n's row of its health.parquet when that row
// was computed, by this version of the health stage, from the very
// tables and metrics files ref holds (their checksums match); ok false
// otherwise, and the caller computes the row.
func storedHealth(ctx context.Context, st artifacts.Store, ref string, n int, files iterationFiles) (Health, bool, error) {
	if _, ok := files[runs.HealthFile]; !ok {
		return Health{}, false, nil
	}
	path := runs.IterationPath(n, runs.HealthFile)
	b, err := readObject(ctx, st, ref, path)
	if err != nil {
		return Health{}, false, err
	}
	f, err := tables.OpenFile(bytes.NewReader(b), int64(len(b)), ref+":"+path, nil)
	if err != nil {
		return Health{}, false, nil // not a table this version reads: recompute
	}
	if v, _ := f.Metadata(metaHealthTask); v != healthTaskVersion {
		return Health{}, false, nil
	}
	for _, in := range healthInputs {
		want, ok := f.Metadata(metaHealthFrom + in.name)
		if !ok || want != files[in.file] {
			return Health{}, false, nil
		}
	}
	rows, err := readHealth(ctx, f)
	if err != nil || len(rows) != 1 || rows[0].Iteration != n {
		return Health{}, false, nil
	}
	return rows[0], true, nil
}

// loadIteration is iteration n's health and, when keep, its samples. An
// iteration whose samples are not kept reads its stored health row when
// that is up to date (storedHealth), and its tables only otherwise: the
// cost of a report then grows with the iterations, not with their rows.
func loadIteration(ctx context.Context, st artifacts.Store, ref string, n int, files iterationFiles, keep bool, o LoadOptions) (Health, *IterationSamples, error) {
	if !keep && o.Health.withDefaults() == (*HealthOptions)(nil).withDefaults() {
		h, ok, err := storedHealth(ctx, st, ref, n, files)
		if err != nil || ok {
			return h, nil, err
		}
	}
	trajs, err := readTable(ctx, st, ref, runs.IterationPath(n, runs.TrajectoriesFile), tables.Trajectories)
	if err != nil {
		return Health{}, nil, err
	}
	rws, rule, err := readRewards(ctx, st, ref, runs.IterationPath(n, runs.RewardsFile))
	if err != nil && !errors.Is(err, artifacts.ErrNotFound) {
		return Health{}, nil, err
	}
	rm, err := runs.ReadTrainMetrics(ctx, st, ref, n)
	if err != nil {
		return Health{}, nil, err
	}
	tm := trainFigures(rm)
	ho := o.Health.withDefaults()
	if ho.Correct == nil {
		ho.Correct = rule // nil without a rewards file
	}
	h := ComputeHealth(n, trajs, rws, tm, &ho)
	if !keep {
		return h, nil, nil
	}
	var prompts []tables.Prompt
	if keep {
		prompts, err = readTable(ctx, st, ref, runs.IterationPath(n, runs.PromptsFile), tables.Prompts)
		if err != nil && !errors.Is(err, artifacts.ErrNotFound) {
			return Health{}, nil, err
		}
	}
	s := pickSamples(n, trajs, rws, prompts, o.SamplesPerSide)
	return h, &s, nil
}

func readObject(ctx context.Context, st artifacts.Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	return b, nil
}

func readTable[T any](ctx context.Context, st artifacts.Store, ref, path string, t *tables.Table[T]) ([]T, error) {
	b, err := readObject(ctx, st, ref, path)
	if err != nil {
		return nil, err
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), ref+":"+path, t)
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	return rows, nil
}

// readRewards is a rewards file's rows and its correctness rule (nil
// when the file holds none: tables.CorrectnessOf).
func readRewards(ctx context.Context, st artifacts.Store, ref, path string) ([]tables.Reward, *tables.Correctness, error) {
	b, err := readObject(ctx, st, ref, path)
	if err != nil {
		return nil, nil, err
	}
	rows, rule, err := tables.ReadRewards(bytes.NewReader(b), int64(len(b)), ref+":"+path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s:%s: %w", ref, path, err)
	}
	return rows, &rule, nil
}

// pickSamples keeps the k best and k worst scored samples by total; ties
// go to the lower prompt id, then sample index.
func pickSamples(n int, trajs []tables.Trajectory, rws []tables.Reward, prompts []tables.Prompt, k int) IterationSamples {
	byKey := make(map[sampleKey]*tables.Reward, len(rws))
	for i := range rws {
		byKey[sampleKey{rws[i].PromptID, rws[i].SampleIndex}] = &rws[i]
	}
	pr := make(map[string]*tables.Prompt, len(prompts))
	for i := range prompts {
		pr[prompts[i].PromptID] = &prompts[i]
	}
	var all []Sample
	for i := range trajs {
		t := &trajs[i]
		r := byKey[sampleKey{t.PromptID, t.SampleIndex}]
		if t.Status != tables.StatusOK || r == nil || !r.Scored() {
			continue
		}
		s := Sample{Iteration: n, PromptID: t.PromptID, SampleIndex: t.SampleIndex, Completion: clip(t.Completion, 600),
			FinishReason: t.FinishReason, NumTokens: t.NumTokens, Total: r.Total, Components: r.Components, Turns: episodeTurns(t)}
		if p := pr[t.PromptID]; p != nil {
			s.Prompt, s.Answer = clip(p.Prompt, 400), clip(p.Answer, 200)
		}
		all = append(all, s)
	}
	byID := func(a, b Sample) int {
		if c := cmp.Compare(a.PromptID, b.PromptID); c != 0 {
			return c
		}
		return cmp.Compare(a.SampleIndex, b.SampleIndex)
	}
	slices.SortStableFunc(all, func(a, b Sample) int {
		if c := cmp.Compare(b.Total, a.Total); c != 0 {
			return c
		}
		return byID(a, b)
	})
	out := IterationSamples{Iteration: n}
	k = min(k, len(all)/2)
	out.Best = distinctPrompts(all, k)
	rev := slices.Clone(all)
	slices.Reverse(rev)
	// The worst first; equal totals in id order.
	slices.SortStableFunc(rev, func(a, b Sample) int {
		if c := cmp.Compare(a.Total, b.Total); c != 0 {
			return c
		}
		return byID(a, b)
	})
	out.Worst = distinctPrompts(rev, k)
	return out
}

// distinctPrompts takes the first k samples of ranked, preferring samples
// of prompts not taken yet, in rank order.
func distinctPrompts(ranked []Sample, k int) []Sample {
	var idx []int
	seen := map[string]bool{}
	for i, s := range ranked {
		if len(idx) < k && !seen[s.PromptID] {
			seen[s.PromptID] = true
			idx = append(idx, i)
		}
	}
	for i := 0; i < len(ranked) && len(idx) < k; i++ {
		if !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	out := make([]Sample, len(idx))
	for j, i := range idx {
		out[j] = ranked[i]
	}
	return out
}
