package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
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
func (k *checker) set(path string) bool { _, ok := k.c.pos[path]; return ok }

// validate checks what types alone cannot: ranges, references between
// sections, and what each stage kind needs.
func (c *Config) validate() error {
	k := &checker{c: c}
	if c.Run != "" {
		if err := artifacts.ValidateBranchName(pipeline.RunBranch(c.Run)); err != nil {
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
	k.trainer()
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

// slotOf is the engine's slot of a stage name (one of pipeline.Slots).
func slotOf(name string) pipeline.Slot {
	s, _ := pipeline.SlotByName(name)
	return s
}

var (
	standinKeys  = []string{"sleep", "fail_times", "samples_per_prompt", "judge_url"}
	commandKeys  = []string{"command", "outputs", "environment", "ignore_inputs"}
	rolloutKeys  = []string{"sampling", "batch"}
	externalKeys = []string{"hyperparameters"}
	reEnvName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	rePlace      = regexp.MustCompile(`\{\{\s*([a-z_]+)(?:\.([A-Za-z0-9_-]+))?\s*\}\}`)
)

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
	var other []string
	switch s.Kind {
	case KindStandin:
		other = append(append(append([]string{}, commandKeys...), rolloutKeys...), externalKeys...)
		if k.set(path+".samples_per_prompt") && name != "generate" {
			k.fail(path+".samples_per_prompt", "set it on the generate stage", "%s.samples_per_prompt: only the generate stage samples", path)
		}
		if k.set(path+".judge_url") && name != "reward" {
			k.fail(path+".judge_url", "set it on the reward stage", "%s.judge_url: only the reward stage calls a judge", path)
		}
		if s.FailTimes < 0 || s.SamplesPerPrompt < 0 || s.Sleep < 0 {
			k.fail(path, "", "%s: sleep, fail_times and samples_per_prompt cannot be negative", path)
		}
	case KindCommand:
		other = append(append(append([]string{}, standinKeys...), rolloutKeys...), externalKeys...)
		k.command(name, path, s)
	case KindRollout:
		other = append(append(append([]string{}, standinKeys...), commandKeys...), externalKeys...)
		k.rollout(name, path, s)
	case KindDataset:
		other = append(append(append(append([]string{}, standinKeys...), commandKeys...), rolloutKeys...), externalKeys...)
		if name != "sample" {
			k.fail(path+".kind", "use standin or command", "%s.kind: only the sample stage reads the dataset", path)
		}
	case KindExternal:
		other = append(append(append([]string{}, standinKeys...), rolloutKeys...), "outputs", "ignore_inputs")
		if name != "train" {
			k.fail(path+".kind", "use standin or command", "%s.kind: only the train stage can be an external trainer", path)
		} else if len(s.Command) == 0 {
			k.fail(path, "e.g. command: [python3, trainers/python/grpo_train.py]", "%s: an external trainer needs command (its argv; the contract's flags are appended)", path)
		}
		for key := range s.Environment {
			if !reEnvName.MatchString(key) {
				k.fail(path+".environment."+key, "", "%s.environment: %q is not a variable name", path, key)
			}
		}
	case KindGRPO:
		other = append(append(append(append([]string{}, standinKeys...), commandKeys...), rolloutKeys...), externalKeys...)
		if name != "train" {
			k.fail(path+".kind", "use standin or command", "%s.kind: only the train stage can be grpo", path)
		} else if p := k.c.Policy; p == nil || p.Kind != PolicyEmbedded {
			k.fail(path+".kind", "set policy: {kind: embedded}, or train with kind: command (the external trainer contract)",
				"%s.kind: the grpo stage trains the embedded model, so the policy must be kind: embedded", path)
		}
	case KindCEL:
		other = append(append(append(append([]string{}, standinKeys...), commandKeys...), rolloutKeys...), externalKeys...)
		if name != "reward" {
			k.fail(path+".kind", "use standin or command", "%s.kind: only the reward stage can be a cel reward spec", path)
		} else if s.Spec == "" {
			k.fail(path, "e.g. spec: reward.yaml", "%s: a cel reward stage needs spec (a reward spec file, see docs/REWARDS.md)", path)
		}
	case "":
		k.fail(path, "kind: standin or kind: command", "%s: missing key kind", path)
		return
	default:
		k.fail(path+".kind", "use standin, command, (sample) dataset, (reward) cel, (generate) rollout or (train) grpo or external", "%s.kind: unknown kind %q", path, s.Kind)
		return
	}
	if s.Kind != KindCEL && k.set(path+".spec") {
		k.fail(path+".spec", "use kind: cel on the reward stage", "%s.spec: only a cel reward stage takes spec", path)
	}
	for _, key := range other {
		if k.set(path + "." + key) {
			k.fail(path+"."+key, "", "%s.%s: only %s stages take %s", path, key, kindOf(key), key)
		}
	}
}

// kindOf names the stage kind that takes a key.
func kindOf(key string) string {
	switch {
	case slices.Contains(commandKeys, key):
		return KindCommand
	case slices.Contains(rolloutKeys, key):
		return KindRollout
	case slices.Contains(externalKeys, key):
		return KindExternal
	}
	return KindStandin
}

func (k *checker) rollout(name, path string, s *Stage) {
	if name != "generate" {
		k.fail(path+".kind", "use standin or command", "%s.kind: only the generate stage can be a rollout", path)
		return
	}
	if k.c.Policy == nil {
		k.fail(path, "add a policy section, e.g. policy: {kind: embedded, model: tiny-arith}", "%s: a rollout stage samples from the policy section, which is missing", path)
	}
	sp := s.Sampling
	if sp == nil {
		k.fail(path, "e.g. sampling: {n: 8, temperature: 1.0, max_tokens: 8}", "%s: a rollout stage needs sampling", path)
		return
	}
	sp2 := path + ".sampling"
	switch {
	case sp.N < 1:
		k.fail(sp2+".n", "the group size G, e.g. 8", "%s.n: must be at least 1, got %d", sp2, sp.N)
	case sp.MaxTokens < 1:
		k.fail(sp2+".max_tokens", "", "%s.max_tokens: must be at least 1, got %d", sp2, sp.MaxTokens)
	case sp.Temperature != nil && *sp.Temperature < 0:
		k.fail(sp2+".temperature", "0 samples greedily", "%s.temperature: cannot be negative, got %g", sp2, *sp.Temperature)
	case sp.TopP < 0 || sp.TopP > 1:
		k.fail(sp2+".top_p", "", "%s.top_p: must be in (0, 1], got %g", sp2, sp.TopP)
	case s.Batch < 0:
		k.fail(path+".batch", "", "%s.batch: cannot be negative, got %d", path, s.Batch)
	}
}

func (k *checker) trainer() {
	t := k.c.Trainer
	if t == nil {
		return
	}
	if tr := k.c.Stages.Train; tr == nil || tr.Kind != KindGRPO {
		k.fail("trainer", "set stages.train to {kind: grpo}", "trainer: no grpo train stage uses these hyperparameters")
	}
	switch {
	case t.LR < 0 || t.WeightDecay < 0 || t.Beta < 0:
		k.fail("trainer", "", "trainer: lr, weight_decay and beta cannot be negative")
	case t.Epochs < 0 || t.Minibatches < 0 || t.Shards < 0:
		k.fail("trainer", "", "trainer: epochs, minibatches and shards cannot be negative")
	case t.EpsLow < 0 || t.EpsLow >= 1 || t.EpsHigh < 0:
		k.fail("trainer", "e.g. eps_low: 0.2, eps_high: 0.28", "trainer: the clip range [1-eps_low, 1+eps_high] must surround 1")
	case t.Aggregation != "" && t.Aggregation != "token" && t.Aggregation != "sequence":
		k.fail("trainer.aggregation", "use token or sequence", "trainer.aggregation: unknown aggregation %q", t.Aggregation)
	case t.LoRA != nil && (t.LoRA.Rank < 0 || t.LoRA.Alpha < 0):
		k.fail("trainer.lora", "", "trainer.lora: rank and alpha cannot be negative")
	}
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
	if e.Name != "" && !reEnvName.MatchString(e.Name) {
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
		if kk < 1 || kk > e.N {
			k.fail(fmt.Sprintf("eval.k[%d]", i), "sample at least k per problem (n ≥ 2k is better)", "eval.k[%d]: k=%d but n=%d samples per problem", i, kk, e.N)
		}
	}
	if k.c.Policy == nil {
		k.fail("eval", "add a policy section", "eval: evaluation samples from the policy section, which is missing")
	}
	if r := k.c.Stages.Reward; r == nil || r.Kind != KindCEL {
		k.fail("eval", "use stages.reward: {kind: cel, spec: ...}", "eval: evaluation scores with the reward stage's spec, so the reward stage must be kind: cel")
	}
}

// embeddedModels are the weights the binary ships.
var embeddedModels = []string{"tiny-arith"}

func (k *checker) policy() {
	p := k.c.Policy
	if p == nil {
		return
	}
	embeddedOnly, openaiOnly := p.Serve != "", len(p.Endpoints) > 0 || p.KeyEnv != "" || p.AdapterRoot != "" || p.Concurrency != 0 || p.Timeout != 0 || p.Retries != 0
	switch p.Kind {
	case PolicyEmbedded:
		if p.Serve != "" && p.Serve != ServeInProcess && p.Serve != ServeHTTP {
			k.fail("policy.serve", "use inprocess or http", "policy.serve: unknown way %q", p.Serve)
		}
		if openaiOnly {
			k.fail("policy", "remove endpoints, key_env, adapter_root, concurrency, timeout and retries", "policy: those keys configure an openai policy, not the embedded model")
		}
		if p.Model != "" && !slices.Contains(embeddedModels, p.Model) && !strings.HasSuffix(p.Model, ".safetensors") {
			k.fail("policy.model", "use tiny-arith or a .safetensors file", "policy.model: %q is neither a shipped model nor a .safetensors file", p.Model)
		}
	case PolicyOpenAI:
		if embeddedOnly {
			k.fail("policy.serve", "remove it: an openai policy is already a server", "policy.serve: only the embedded model is served by the run")
		}
		if p.Model == "" {
			k.fail("policy", "e.g. model: Qwen/Qwen2.5-0.5B-Instruct", "policy: an openai policy needs model (the served base model)")
		}
		if len(p.Endpoints) == 0 {
			k.fail("policy", "e.g. endpoints: [http://127.0.0.1:8000]", "policy: an openai policy needs endpoints")
		}
		for i, e := range p.Endpoints {
			if u, err := url.Parse(e); err == nil && u.User != nil {
				// The config is recorded as run/config.yaml: a password here
				// would be stored. Name the URL without it.
				k.fail(fmt.Sprintf("policy.endpoints[%d]", i), "put the key in a variable and name it in key_env",
					"policy.endpoints[%d]: %s carries credentials", i, u.Redacted())
			} else if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
				k.fail(fmt.Sprintf("policy.endpoints[%d]", i), "e.g. http://127.0.0.1:8000", "policy.endpoints[%d]: %q is not an http(s) URL", i, e)
			}
		}
		if p.KeyEnv != "" && !reEnvName.MatchString(p.KeyEnv) {
			k.fail("policy.key_env", "name the variable, e.g. OPENAI_API_KEY", "policy.key_env: %q is not a variable name", p.KeyEnv)
		}
		if p.Concurrency < 0 || p.Timeout < 0 || p.Retries < 0 {
			k.fail("policy", "", "policy: concurrency, timeout and retries cannot be negative")
		}
	case "":
		k.fail("policy", "kind: embedded or kind: openai", "policy: missing key kind")
	default:
		k.fail("policy.kind", "use embedded or openai", "policy.kind: unknown kind %q", p.Kind)
	}
	if g := k.c.Stages.Generate; g == nil || g.Kind != KindRollout {
		k.fail("policy", "set stages.generate to {kind: rollout, sampling: {...}}", "policy: no rollout stage samples from it")
	}
}

func (k *checker) command(name, path string, s *Stage) {
	if len(s.Command) == 0 {
		k.fail(path, `e.g. command: [python, gen.py, "{{inputs.prompts}}", "{{outputs.trajectories}}"]`, "%s: a command stage needs command (an argv list)", path)
	}
	if len(s.Environment) > 0 && len(s.Command) > 0 && strings.Contains(s.Command[0], "=") {
		k.fail(path+".command[0]", "name the program without '='", "%s.command[0]: %q cannot follow environment variables", path, s.Command[0])
	}
	outs := map[string]Output{}
	for i, o := range s.Outputs {
		op := fmt.Sprintf("%s.outputs[%d]", path, i)
		switch {
		case o.Name == "":
			k.fail(op, "", "%s: an output needs a name", op)
		case outs[o.Name].Name != "":
			k.fail(op, "", "%s: output %q is declared twice", op, o.Name)
		case strings.Contains(o.File, "/") || o.File == "." || o.File == "..":
			k.fail(op+".file", "", "%s.file: %q must be a plain file name", op, o.File)
		}
		if o.Name != "" {
			outs[o.Name] = o
		}
	}
	for _, need := range slotOf(name).Outputs {
		o, ok := outs[need]
		switch {
		case !ok:
			k.fail(path+".outputs", fmt.Sprintf("add {name: %s, file: ...}", need), "%s: the loop needs output %q from the %s stage; it is not declared", path, need, name)
		case need == pipeline.OutAdapter && !o.Dir:
			k.fail(path+".outputs", "add dir: true", "%s: output %q is a directory (the adapter's files)", path, need)
		}
	}
	for key := range s.Environment {
		if !reEnvName.MatchString(key) {
			k.fail(path+".environment."+key, "", "%s.environment: %q is not a variable name", path, key)
		}
	}
	for _, in := range s.IgnoreInputs {
		if !slices.Contains(slotOf(name).Inputs, in) {
			k.fail(path+".ignore_inputs", "inputs: "+strings.Join(slotOf(name).Inputs, ", "), "%s.ignore_inputs: the %s stage has no input %q", path, name, in)
		}
	}
	for i, arg := range s.Command {
		ap := fmt.Sprintf("%s.command[%d]", path, i)
		for _, m := range rePlace.FindAllStringSubmatch(arg, -1) {
			kind, ref := m[1], m[2]
			switch {
			case kind == "inputs" && slices.Contains(slotOf(name).Inputs, ref):
				if ref == "policy" && k.c.InitialPolicy == "" {
					k.fail(ap, "set initial_policy, or pass the policy another way",
						"%s: %s: the first iteration has no policy input (the base model), so the placeholder cannot be filled", ap, m[0])
				}
			case kind == "inputs":
				k.fail(ap, "inputs: "+strings.Join(slotOf(name).Inputs, ", "), "%s: %s: the %s stage has no input %q", ap, m[0], name, ref)
			case kind == "outputs" && outs[ref].Name != "":
			case kind == "outputs":
				k.fail(ap, "declare it under outputs", "%s: %s: no output %q is declared", ap, m[0], ref)
			case kind == "params" && slices.Contains(slotOf(name).Params, ref):
			case kind == "params":
				k.fail(ap, "params: "+strings.Join(slotOf(name).Params, ", "), "%s: %s: the %s stage has no param %q", ap, m[0], name, ref)
			case ref == "" && (kind == "attempt" || kind == "seed" || kind == "iteration" || kind == "workdir"):
			default:
				k.fail(ap, "known: inputs.NAME, outputs.NAME, params.NAME, attempt, seed, iteration, workdir", "%s: unknown placeholder %s", ap, m[0])
			}
		}
	}
}

func suggestName(name string, known []string) string {
	if len(known) == 0 {
		return "define it under environments"
	}
	h := suggest(name, known)
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
