package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

// ErrConfigChanged is resuming a run with a config that changes a key
// that alters what its committed iterations mean (Meaningful), without
// Options.AllowConfigChange.
// Its message names the meaningful changes, then the others.
var ErrConfigChanged = errors.New("the config changes what the run's committed iterations mean")

// Change is one key whose value differs between a run's recorded config
// and the one it resumes with.
type Change struct {
	Key string `json:"key"` // a dotted path: trainer.lr, eval.k
	Old string `json:"old"` // as one line of YAML or JSON; "(unset)" when absent
	New string `json:"new"`
	// Meaningful: the key alters what earlier iterations mean.
	Meaningful bool `json:"meaningful"`
}

func (c Change) String() string { return c.Key + " " + c.Old + " → " + c.New }

// harmless are the keys (and the sections below them) whose change does
// not alter what the committed iterations mean: how long the run goes
// on, how often it is evaluated, where its tasks run and its figures go.
// A key not listed (or under policy, stages.NAME other than these) is
// meaningful: the seed, dataset, batch size, the trainer's section (lr,
// loss, β, LoRA), the advantage estimator, the reward spec, sampling, the
// policy's model and the eval set and sampling.
var harmless = []string{"run", "store", "iterations", "eval.every", "tracking", "machine", "environments", "overlap"}

// Meaningful reports whether a change of key (a dotted path) alters what
// a run's committed iterations mean (docs/PIPELINE.md).
func Meaningful(key string) bool {
	for _, h := range harmless {
		if key == h || strings.HasPrefix(key, h+".") {
			return false
		}
	}
	parts := strings.Split(key, ".")
	switch {
	case parts[0] == "policy":
		// The backend's connection (base_url, timeouts) may move; the
		// model it serves may not.
		return len(parts) < 2 || parts[1] == "kind" || parts[1] == "model"
	case parts[0] == "stages" && len(parts) >= 3:
		// Where a stage runs is not what it computes.
		return parts[2] != "env" && parts[2] != "settings"
	}
	return true
}

// configChanges are the keys whose values differ between two recorded
// configs (YAML), sorted.
func configChanges(old, cur []byte) ([]Change, error) {
	var a, b any
	if err := yamlcore.Unmarshal(old, &a); err != nil {
		return nil, fmt.Errorf("read the recorded config: %w", err)
	}
	if err := yamlcore.Unmarshal(cur, &b); err != nil {
		return nil, fmt.Errorf("read the config: %w", err)
	}
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", a, fa)
	flatten("", b, fb)
	var out []Change
	for k, v := range fa {
		if w, ok := fb[k]; !ok || flow(v) != flow(w) {
			n := "(unset)"
			if ok {
				n = flow(w)
			}
			out = append(out, Change{Key: k, Old: flow(v), New: n, Meaningful: Meaningful(k)})
		}
	}
	for k, w := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, Change{Key: k, Old: "(unset)", New: flow(w), Meaningful: Meaningful(k)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// flatten puts the leaves of v (a decoded YAML tree) into out by dotted
// path; a list is one leaf.
func flatten(path string, v any, out map[string]any) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, x := range m {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, x, out)
		}
		return
	}
	if path != "" {
		out[path] = v
	}
}

// flow is a leaf as one line: a scalar as it reads, a list or mapping as
// JSON.
func flow(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		b, err := json.Marshal(v)
		if err == nil {
			return string(b)
		}
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// checkConfigChange says how a resumed run's config differs from the one
// it recorded: an error naming every change when one is meaningful and
// allow is false, else the changes for a warning.
func checkConfigChange(name string, recorded, body []byte, allow bool) ([]Change, error) {
	changes, err := configChanges(recorded, body)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	var meaningful, others []Change
	for _, c := range changes {
		if c.Meaningful {
			meaningful = append(meaningful, c)
		} else {
			others = append(others, c)
		}
	}
	if len(meaningful) == 0 || allow {
		return changes, nil
	}
	also := ""
	if len(others) > 0 {
		also = " (also changed: " + joinChanges(others) + ")"
	}
	return changes, fmt.Errorf("run %s: %w: %s%s\nhint: start a new run (--run NAME), put the recorded values back (rlpipe cat %s), or resume anyway with --allow-config-change",
		name, ErrConfigChanged, joinChanges(meaningful), also, runs.Branch(name)+"@:"+runs.ConfigPath)
}

// joinChanges is changes as "a 1 → 2, b x → y".
func joinChanges(changes []Change) string {
	s := make([]string, len(changes))
	for i, c := range changes {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}
