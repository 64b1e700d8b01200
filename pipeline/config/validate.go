package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/trackers"
)

// at is where path's key is, or its nearest parent's.
func (c *Config) at(path string) position {
	for p := path; p != ""; {
		if pos, ok := c.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return position{}
}

type checker struct {
	c    *Config
	errs []error
}

func (k *checker) fail(path, hint, format string, a ...any) {
	if len(k.errs) >= maxErrors {
		return
	}
	p := k.c.at(path)
	k.errs = append(k.errs, &Error{File: k.c.file, Line: p.line, Column: p.col, Path: path, Msg: fmt.Sprintf(format, a...), Hint: hint})
}

// set reports whether the file names path.
func (k *checker) set(path string) bool { return k.c.set(path) }

// validate checks what types alone cannot: ranges, references between
// sections, and what each stage kind needs.
func (c *Config) validate() error {
	k := &checker{c: c}
	if c.Run != "" {
		if err := artifacts.ValidateBranchName(runs.Branch(c.Run)); err != nil {
			k.fail("run", "use letters, digits, '_' and '-'", "run: %q is not a valid run name", c.Run)
		}
	}
	switch {
	case !k.set("iterations"):
		k.fail("iterations", "e.g. iterations: 10", "missing key iterations (the last iteration to run)")
	case c.Iterations < 1:
		k.fail("iterations", "", "iterations: must be at least 1, got %d", c.Iterations)
	}
	switch {
	case !k.set("batch_size"):
		k.fail("batch_size", "e.g. batch_size: 16", "missing key batch_size (prompts per iteration)")
	case c.BatchSize < 1:
		k.fail("batch_size", "", "batch_size: must be at least 1, got %d", c.BatchSize)
	}
	if c.Dataset == "" {
		k.fail("dataset", "e.g. dataset: main:data/prompts.parquet", "missing key dataset (the prompts table, REF:PATH)")
	} else {
		k.artifact("dataset", c.Dataset)
	}
	if c.InitialPolicy != "" {
		k.artifact("initial_policy", c.InitialPolicy)
	}
	if c.Overlap.MaxStaleness < 0 {
		k.fail("overlap.max_staleness", "0 is on-policy; 1 lets generation run one iteration ahead", "overlap.max_staleness: must be 0 or more, got %d", c.Overlap.MaxStaleness)
	}
	if m := c.Machine; m != nil {
		if m.CPU < 0 || m.MemoryMB < 0 || m.GPU < 0 {
			k.fail("machine", "", "machine: cpu, memory_mb and gpu cannot be negative")
		}
	}
	for _, name := range sortedKeys(c.Environments) {
		k.settings("environments."+name, c.Environments[name])
	}
	for _, name := range pipeline.SlotNames() {
		k.stage(name, c.Stages.all()[name])
	}
	k.policy()
	k.advantages()
	k.filterGroups()
	k.tracking()
	k.sections()
	k.eval()
	return errors.Join(k.errs...)
}

func (k *checker) artifact(path, v string) {
	_, p, err := artifacts.SplitArtifact(v)
	if err == nil && p == "" {
		err = errors.New("the path is empty")
	}
	if err == nil {
		err = artifacts.ValidatePath(strings.TrimSuffix(p, "/"))
	}
	if err != nil {
		k.fail(path, "name it as REF:PATH, e.g. main:data/prompts.parquet", "%s: %q is not REF:PATH: %v", path, v, err)
	}
}

func (k *checker) settings(path string, s pipeline.Settings) {
	switch {
	case s.Resources.CPU < 0 || s.Resources.MemoryMB < 0 || s.Resources.GPU < 0:
		k.fail(path+".resources", "", "%s.resources: cannot be negative", path)
	case s.Retry.Attempts < 0:
		k.fail(path+".retries.attempts", "1 means no retry", "%s.retries.attempts: must be at least 1, got %d", path, s.Retry.Attempts)
	case s.Retry.Factor != 0 && s.Retry.Factor < 1:
		k.fail(path+".retries.factor", "", "%s.retries.factor: must be at least 1, got %g", path, s.Retry.Factor)
	case s.Retry.Backoff < 0 || s.Retry.MaxBackoff < 0:
		k.fail(path+".retries", "", "%s.retries: backoffs cannot be negative", path)
	case s.Timeout < 0:
		k.fail(path+".timeout", "", "%s.timeout: cannot be negative", path)
	case s.Deadline < 0:
		k.fail(path+".deadline", "", "%s.deadline: cannot be negative", path)
	case s.Cache.Mode != "" && s.Cache.Mode != pipeline.CacheAuto && s.Cache.Mode != pipeline.CacheDisable:
		k.fail(path+".cache.mode", "use auto or disable", "%s.cache.mode: unknown mode %q", path, s.Cache.Mode)
	case s.Concurrency < 0:
		k.fail(path+".concurrency", "0 means bounded by resources only", "%s.concurrency: cannot be negative", path)
	}
}

// stageChecker is the checker a stage's kind reports to: keys are below
// the stage ("sampling.n"), or from the top with a leading "/"
// ("/trainer.lr", for a kind with a section of its own).
type stageChecker struct {
	k    *checker
	slot string
}

func (s stageChecker) Slot() string { return s.slot }

func (s stageChecker) Path(key string) string {
	if top, ok := strings.CutPrefix(key, "/"); ok {
		return top
	}
	if key == "" {
		return "stages." + s.slot
	}
	return "stages." + s.slot + "." + key
}

func (s stageChecker) Set(key string) bool { return s.k.set(s.Path(key)) }

func (s stageChecker) Fail(key, hint, format string, a ...any) {
	s.k.fail(s.Path(key), hint, format, a...)
}

func (s stageChecker) File() kind.File { return s.k.c.facts() }

// tracking checks the tracking section's entries: a known kind, and
// what each backend's options say of themselves.
func (k *checker) tracking() {
	for i, t := range k.c.Tracking {
		at := fmt.Sprintf("tracking[%d]", i)
		switch {
		case t.Kind == "":
			k.fail(at, "kind: "+strings.Join(k.c.reg.Trackers.Kinds(), " or kind: "), "%s: missing key kind", at)
			continue
		case t.Options == nil:
			if _, ok := k.c.reg.Trackers.Lookup(t.Kind); !ok {
				k.fail(at+".kind", "use "+strings.Join(k.c.reg.Trackers.Kinds(), " or "), "%s.kind: unknown tracker kind %q", at, t.Kind)
			}
			continue
		}
		if v, ok := t.Options.(trackers.Validator); ok {
			if err := v.Validate(); err != nil {
				// The backend's message starts with its key ("dir: missing").
				key, _, _ := strings.Cut(err.Error(), ":")
				path := at + "." + key
				if !k.set(path) {
					path = at
				}
				k.fail(path, "", "%s.%s", at, err)
			}
		}
	}
}

// policyChecker is the checker a policy backend's options report to.
type policyChecker struct{ k *checker }

func (p policyChecker) Path(key string) string {
	if key == "" {
		return "policy"
	}
	return "policy." + key
}
func (p policyChecker) Set(key string) bool { return p.k.set(p.Path(key)) }
func (p policyChecker) Fail(key, hint, format string, a ...any) {
	p.k.fail(p.Path(key), hint, format, a...)
}

func (k *checker) stage(name string, s *Stage) {
	path := "stages." + name
	if s == nil {
		k.fail(path, "e.g. "+name+": {kind: standin}", "missing stage %s: the loop needs sample, generate, reward and train", name)
		return
	}
	if _, ok := k.c.Environments[s.Env]; !ok {
		k.fail(path+".env", suggestName(s.Env, sortedKeys(k.c.Environments)), "%s.env: environment %q is not defined under environments", path, s.Env)
	}
	if s.Settings != nil {
		k.settings(path+".settings", *s.Settings)
	}
	switch {
	case s.Kind == "":
		k.fail(path, "kind: standin or kind: command", "%s: missing key kind", path)
	case s.Options == nil:
		k.fail(path+".kind", k.c.reg.Hint(), "%s.kind: unknown kind %q", path, s.Kind)
	default:
		s.Options.Check(stageChecker{k: k, slot: name})
	}
}

// sections reports a kind's section (trainer) that no stage of the kind
// uses.
func (k *checker) sections() {
	for _, kk := range k.c.reg.Kinds {
		sk, ok := kk.(kind.Sectioned)
		if !ok || !k.set(sk.Section()) {
			continue
		}
		used := false
		for _, s := range k.c.Stages.all() {
			used = used || (s != nil && s.Kind == kk.Name())
		}
		if !used {
			slot := strings.Join(kk.Slots(), " or ")
			k.fail(sk.Section(), fmt.Sprintf("set stages.%s to {kind: %s}", slot, kk.Name()),
				"%s: no %s %s stage uses this section", sk.Section(), kk.Name(), slot)
		}
	}
}

// kindsWith names the kinds whose stages have a property, and the slot
// of the last.
func (k *checker) kindsWith(has func(kind.Stage) bool) (names []string, slot string) {
	for _, kk := range k.c.reg.Kinds {
		if has(kk.New()) {
			names = append(names, kk.Name())
			slot = kk.Slots()[0]
		}
	}
	return names, slot
}

func (k *checker) eval() {
	e := k.c.Eval
	if e == nil {
		return
	}
	if e.Set == "" {
		k.fail("eval", "e.g. set: main:data/heldout.parquet", "eval: missing key set (the held-out prompts table, REF:PATH)")
	} else {
		k.artifact("eval.set", e.Set)
		if e.Set == k.c.Dataset {
			k.fail("eval.set", "evaluate on problems the policy never trains on", "eval.set: it is the training dataset")
		}
	}
	if e.Name != "" && !kind.ReEnvName.MatchString(e.Name) {
		k.fail("eval.name", "letters, digits and _", "eval.name: %q is not a plain name", e.Name)
	}
	switch {
	case e.Every < 1:
		k.fail("eval.every", "e.g. every: 5", "eval.every: must be at least 1, got %d", e.Every)
	case e.N < 1:
		k.fail("eval.n", "samples per problem, e.g. 16", "eval.n: must be at least 1, got %d", e.N)
	case e.MaxTokens < 1:
		k.fail("eval.max_tokens", "", "eval.max_tokens: must be at least 1, got %d", e.MaxTokens)
	case e.Temperature != nil && *e.Temperature < 0:
		k.fail("eval.temperature", "", "eval.temperature: cannot be negative")
	}
	for i, kk := range e.K {
		if kk < 1 {
			k.fail(fmt.Sprintf("eval.k[%d]", i), "k is the k of pass@k, at least 1 and at most eval.n, e.g. k: [1, 4, 8]", "eval.k[%d]: k must be at least 1, got %d", i, kk)
			continue
		}
		if kk > e.N {
			k.fail(fmt.Sprintf("eval.k[%d]", i), "sample at least k per problem (n ≥ 2k is better)", "eval.k[%d]: k=%d but n=%d samples per problem", i, kk, e.N)
		}
	}
	// A generate stage that samples the eval set itself (stand-ins,
	// episodes) may need no policy section; one that does says so.
	selfSampling, _ := k.kindsWith(func(s kind.Stage) bool { _, ok := s.(kind.EvalGenerator); return ok })
	if g := k.c.Stages.Generate; k.c.Policy == nil && (g == nil || !slices.Contains(selfSampling, g.Kind)) {
		k.fail("eval", "add a policy section", "eval: evaluation samples from the policy section, which is missing")
	}
	scoring, _ := k.kindsWith(func(s kind.Stage) bool { _, ok := s.(kind.Scoring); return ok })
	if r := k.c.Stages.Reward; r == nil || !slices.Contains(scoring, r.Kind) {
		k.fail("eval", fmt.Sprintf("use stages.reward: {kind: %s, ...}", strings.Join(scoring, " or ")),
			"eval: evaluation scores with the reward stage's spec, so the reward stage must be kind: %s", strings.Join(scoring, " or "))
	}
}

// advantages checks that the advantages section names a registered
// estimator, for a train stage that trains on advantages (one that adds
// the advantages step: kind.Stepped).
func (k *checker) advantages() {
	a := k.c.Advantages
	if a == nil {
		return
	}
	if a.Std != "" && a.Std != "sample" && a.Std != "population" {
		k.fail("advantages.std", "use sample or population", "advantages.std: unknown standard deviation %q", a.Std)
	}
	if a.Estimator == "" && a.Std == "" && a.Gamma == nil && a.Lambda == nil && !a.MaskTruncatedCompletions {
		return
	}
	var e advantages.Estimator
	if a.Estimator != "" {
		var err error
		if e, err = k.c.reg.Estimators.Lookup(a.Estimator); err != nil {
			k.fail("advantages.estimator", "use "+strings.Join(k.c.reg.Estimators.Names(), " or "), "advantages.estimator: unknown advantage estimator %q", a.Estimator)
			return
		}
		k.groupSize(e)
	}
	k.discount(e, "gamma", a.Gamma)
	k.discount(e, "lambda", a.Lambda)
	if t := k.c.Stages.Train; t != nil && t.Options != nil {
		if _, ok := t.Options.(kind.Stepped); !ok {
			trainers, _ := k.kindsWith(func(s kind.Stage) bool { _, ok := s.(kind.Stepped); return ok })
			k.fail("advantages", "remove it, or use kind: "+strings.Join(trainers, " or kind: ")+" on the train stage",
				"advantages: the train stage (kind %s) trains on no advantages", t.Kind)
		}
	}
}

// discount checks the advantages section's gamma or lambda: a number in
// [0, 1], for an estimator that discounts (a CriticEstimator: GAE).
func (k *checker) discount(e advantages.Estimator, key string, v *float64) {
	if v == nil {
		return
	}
	path := "advantages." + key
	switch {
	case !advantages.NeedsCritic(e):
		name := "grpo"
		if e != nil {
			name = e.Name()
		}
		k.fail(path, "remove it, or use estimator: gae", "%s: only the gae estimator discounts; %s does not", path, name)
	case !(*v >= 0 && *v <= 1):
		k.fail(path, "use a number from 0 to 1 (verl's default is 1)", "%s: %g is not in [0, 1]", path, *v)
	}
}

// groupSize checks that the generate stage samples as many per prompt
// as estimator e needs (advantages.MinGroup: RLOO's leave-one-out
// baseline needs two), when the stage says how many (kind.Grouped).
func (k *checker) groupSize(e advantages.Estimator) {
	min, g := advantages.MinGroup(e), k.c.Stages.Generate
	if min < 2 || g == nil {
		return
	}
	gr, ok := g.Options.(kind.Grouped)
	if !ok {
		return
	}
	if key, n := gr.GroupSize(); n > 0 && n < min {
		path := "stages.generate." + key
		k.fail("advantages.estimator", fmt.Sprintf("set %s to %d or more, or use another estimator", path, min),
			"advantages.estimator: %s needs at least %d samples per prompt, but %s is %d", e.Name(), min, path, n)
	}
}

func (k *checker) policy() {
	p := k.c.Policy
	if p == nil {
		return
	}
	switch {
	case p.Kind == "":
		k.fail("policy", "kind: "+strings.Join(k.c.reg.Policies.Kinds(), " or kind: "), "policy: missing key kind")
	case p.Options != nil:
		if c, ok := p.Options.(policy.Checked); ok {
			c.Check(policyChecker{k}, p.Model)
		}
	default:
		if _, ok := k.c.reg.Policies.Lookup(p.Kind); !ok {
			k.fail("policy.kind", "use "+strings.Join(k.c.reg.Policies.Kinds(), " or "), "policy.kind: unknown kind %q", p.Kind)
		}
	}
	samplers, slot := k.kindsWith(func(s kind.Stage) bool { _, ok := s.(kind.Sampler); return ok })
	sampled := false
	for _, s := range k.c.Stages.all() {
		sampled = sampled || (s != nil && slices.Contains(samplers, s.Kind))
	}
	if !sampled && len(samplers) > 0 {
		k.fail("policy", fmt.Sprintf("set stages.%s to {kind: %s, ...}", slot, samplers[0]),
			"policy: no %s stage samples from it", strings.Join(samplers, " or "))
	}
}

func suggestName(name string, known []string) string {
	if len(known) == 0 {
		return "define it under environments"
	}
	h := yamlcore.Suggest(name, known)
	if strings.HasPrefix(h, "known keys: ") {
		return "defined: " + strings.TrimPrefix(h, "known keys: ")
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
