package datasets

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/internal/yamlcore"
)

//go:embed reasoninggym.py
var gymScript string

// MaxGymSize caps Gym's Size: past it, generating takes minutes for most
// families and the rows are held in memory before they are written.
const MaxGymSize = 100_000

// GymSplitTrain and GymSplitHeldOut are the split column of Gym's rows,
// the arithmetic task's values (arith.SplitTrain, arith.SplitHeldOut).
const (
	GymSplitTrain   = "train"
	GymSplitHeldOut = "test"
)

// Errors of Gym, tested with errors.Is. All but ErrNoReasoningGym wrap
// ErrInvalid: the families, the config or the sizes asked for are wrong.
var (
	// ErrUnknownFamily: reasoning-gym has no family of that name.
	ErrUnknownFamily = fmt.Errorf("unknown reasoning-gym family: %w", ErrInvalid)
	// ErrUnknownConfigKey: a --config key is not a field of the family's config.
	ErrUnknownConfigKey = fmt.Errorf("unknown reasoning-gym config key: %w", ErrInvalid)
	// ErrBadConfig: the family's config refuses a value, the family fails
	// to generate a problem with it (an exception, metadata that is not
	// JSON), or a --config argument is not KEY=VALUE.
	ErrBadConfig = fmt.Errorf("bad reasoning-gym config: %w", ErrInvalid)
	// ErrTooFewProblems: a family yields fewer distinct questions than asked for.
	ErrTooFewProblems = fmt.Errorf("too few distinct reasoning-gym problems: %w", ErrInvalid)
	// ErrNoReasoningGym: the interpreter cannot import reasoning_gym.
	ErrNoReasoningGym = errors.New("no reasoning_gym package")
)

// GymFamily is one reasoning-gym family to draw from.
type GymFamily struct {
	// Name is the family's registered name: "chain_sum".
	Name string
	// Weight is its share of the rows, relative to the other families' (1 when unset).
	Weight float64
	// Config holds its config keys (not seed or size) and values.
	Config map[string]any
	// args are the --config arguments that set Config, for messages.
	args []string
}

// ParseGymFamilies parses "FAMILY[:WEIGHT][,FAMILY[:WEIGHT]…]".
func ParseGymFamilies(list string) ([]GymFamily, error) {
	var out []GymFamily
	for _, f := range strings.Split(list, ",") {
		name, w, hasW := strings.Cut(strings.TrimSpace(f), ":")
		if name == "" {
			return nil, gymErrorf(ErrBadConfig, "families %q: an empty family name; give FAMILY[:WEIGHT][,FAMILY[:WEIGHT]…]", list)
		}
		fam := GymFamily{Name: name, Weight: 1, Config: map[string]any{}}
		if hasW {
			x, err := strconv.ParseFloat(w, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return nil, gymErrorf(ErrBadConfig, "family %q: the weight %q is not a positive number", f, w)
			}
			fam.Weight = x
		}
		if slices.ContainsFunc(out, func(g GymFamily) bool { return g.Name == name }) {
			return nil, gymErrorf(ErrBadConfig, "families %q: %s is given twice", list, name)
		}
		out = append(out, fam)
	}
	return out, nil
}

// SetGymConfig applies one --config argument, "KEY=VALUE" (every family)
// or "FAMILY.KEY=VALUE", to fams. VALUE is a bool (true, false), an
// integer, a finite float, JSON when it starts with [ or {, else a
// string. Whether a family has KEY is checked by Gym.
func SetGymConfig(fams []GymFamily, arg string) error {
	key, val, ok := strings.Cut(arg, "=")
	if !ok || key == "" {
		return gymErrorf(ErrBadConfig, "--config %q: want KEY=VALUE or FAMILY.KEY=VALUE", arg)
	}
	targets := make([]int, 0, len(fams))
	if fam, k, qualified := strings.Cut(key, "."); qualified {
		i := slices.IndexFunc(fams, func(f GymFamily) bool { return f.Name == fam })
		if i < 0 {
			names := make([]string, len(fams))
			for j, f := range fams {
				names[j] = f.Name
			}
			return gymErrorf(ErrBadConfig, "--config %s: %s is not one of the families asked for (%s)", arg, fam, strings.Join(names, ", "))
		}
		targets, key = append(targets, i), k
	} else {
		for i := range fams {
			targets = append(targets, i)
		}
	}
	switch key {
	case "seed", "size", "":
		return gymErrorf(ErrBadConfig, "--config %s: %q is not a config key here; the seed is --seed and the number of rows --size", arg, key)
	}
	v, err := parseGymValue(val)
	if err != nil {
		return gymErrorf(ErrBadConfig, "--config %s: %v", arg, err)
	}
	for _, i := range targets {
		if _, dup := fams[i].Config[key]; dup {
			return gymErrorf(ErrBadConfig, "--config %s: %s of %s is set twice", arg, key, fams[i].Name)
		}
	}
	for _, i := range targets {
		if fams[i].Config == nil {
			fams[i].Config = map[string]any{}
		}
		fams[i].Config[key] = v
		fams[i].args = append(fams[i].args, arg)
	}
	return nil
}

func parseGymValue(s string) (any, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%s is not a finite number", s)
		}
		return x, nil
	}
	if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("%s is not JSON: %v", s, err)
		}
		return v, nil
	}
	return s, nil
}

// GymOptions say what Gym generates.
type GymOptions struct {
	// Python is the interpreter (a path, or a name on PATH) whose
	// reasoning_gym package generates the problems.
	Python string
	// Families are drawn from in proportion to their weights.
	Families []GymFamily
	// Size is the number of rows, held out and training together: 2 to MaxGymSize.
	Size int
	// HeldOut is how many of them are held out: 1 to Size-1.
	HeldOut int
	// Seed is every family's reasoning-gym seed.
	Seed int64
}

// GymSet is what Gym generated.
type GymSet struct {
	// Version is the reasoning-gym package's version.
	Version string
	// Train and HeldOut are the two splits, families interleaved.
	Train, HeldOut []tables.Prompt
	// Counts are the rows of each family, in the order asked.
	Counts []GymCount
}

// GymCount is how many rows of a family each split holds.
type GymCount struct {
	Family  string `json:"family"`
	Train   int    `json:"train"`
	HeldOut int    `json:"heldout"`
}

// Gym generates reasoning-gym problems with the package's own generators
// (see the package doc's "reasoning-gym"): for each family, its share of
// the held-out rows and then of the training rows, in the order of
// reasoning-gym's indices from 0 with o.Seed, skipping any question
// already drawn (in any family or split). The same options give the same
// rows.
func Gym(ctx context.Context, o *GymOptions) (*GymSet, error) {
	if o.Size < 2 || o.Size > MaxGymSize {
		return nil, gymErrorf(ErrInvalid, "--size %d is out of range: give 2 to %d rows (held out and training together)", o.Size, MaxGymSize)
	}
	if o.HeldOut < 1 || o.HeldOut >= o.Size {
		return nil, gymErrorf(ErrInvalid, "--heldout %d of --size %d leaves no held-out or no training row: give 1 to %d, or a fraction", o.HeldOut, o.Size, o.Size-1)
	}
	if len(o.Families) == 0 {
		return nil, gymErrorf(ErrInvalid, "no reasoning-gym family asked for")
	}
	weights := make([]float64, len(o.Families))
	for i, f := range o.Families {
		weights[i] = cmp.Or(f.Weight, 1)
		if !(weights[i] > 0) || math.IsInf(weights[i], 0) {
			return nil, gymErrorf(ErrBadConfig, "family %s: the weight %v is not a positive number", f.Name, f.Weight)
		}
		if slices.ContainsFunc(o.Families[:i], func(g GymFamily) bool { return g.Name == f.Name }) {
			return nil, gymErrorf(ErrBadConfig, "family %s is asked for twice", f.Name)
		}
	}
	held, train := shares(o.HeldOut, weights), shares(o.Size-o.HeldOut, weights)
	type famReq struct {
		Name    string         `json:"name"`
		Config  map[string]any `json:"config"`
		HeldOut int            `json:"heldout"`
		Train   int            `json:"train"`
	}
	req := struct {
		Seed     int64    `json:"seed"`
		Families []famReq `json:"families"`
	}{Seed: o.Seed}
	for i, f := range o.Families {
		cfg := f.Config
		if cfg == nil {
			cfg = map[string]any{}
		}
		req.Families = append(req.Families, famReq{Name: f.Name, Config: cfg, HeldOut: held[i], Train: train[i]})
	}
	set := &GymSet{}
	byFam := map[string]*[2][]tables.Prompt{}
	err := runGym(ctx, o.Python, req, o.Families, func(line gymLine) error {
		if line.Version != "" {
			set.Version = line.Version
			return nil
		}
		rows := byFam[line.Family]
		if rows == nil {
			rows = &[2][]tables.Prompt{}
			byFam[line.Family] = rows
		}
		r := gymRow(line, set.Version)
		if line.Split == GymSplitHeldOut {
			rows[0] = append(rows[0], r)
		} else {
			rows[1] = append(rows[1], r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var h, t [][]tables.Prompt
	for _, f := range o.Families {
		rows := byFam[f.Name]
		if rows == nil {
			rows = &[2][]tables.Prompt{}
		}
		h, t = append(h, rows[0]), append(t, rows[1])
		set.Counts = append(set.Counts, GymCount{Family: f.Name, Train: len(rows[1]), HeldOut: len(rows[0])})
	}
	set.HeldOut, set.Train = interleave(h), interleave(t)
	if len(set.HeldOut) != o.HeldOut || len(set.Train) != o.Size-o.HeldOut {
		return nil, fmt.Errorf("reasoning-gym: the generator wrote %d held-out and %d training rows, not %d and %d",
			len(set.HeldOut), len(set.Train), o.HeldOut, o.Size-o.HeldOut)
	}
	return set, nil
}

// GymFamilyInfo is a family reasoning-gym has, with its config keys.
type GymFamilyInfo struct {
	Name string   `json:"family"`
	Keys []string `json:"keys"`
}

// GymFamilies lists the families python's reasoning_gym has, by name,
// and the package's version.
func GymFamilies(ctx context.Context, python string) ([]GymFamilyInfo, string, error) {
	var out []GymFamilyInfo
	var version string
	err := runGym(ctx, python, map[string]bool{"list": true}, nil, func(line gymLine) error {
		if line.Version != "" {
			version = line.Version
		} else {
			out = append(out, GymFamilyInfo{Name: line.Family, Keys: line.Keys})
		}
		return nil
	})
	return out, version, err
}

// gymLine is one line the generator writes.
type gymLine struct {
	Version  string    `json:"version"`
	Family   string    `json:"family"`
	Split    string    `json:"split"`
	Question string    `json:"question"`
	Answer   string    `json:"answer"`
	Metadata string    `json:"metadata"`
	Keys     []string  `json:"keys"`
	Error    *gymError `json:"error"`
}

// gymError is the generator's report of a problem with the request.
type gymError struct {
	Code     string   `json:"code"`
	Family   string   `json:"family"`
	Key      string   `json:"key"`
	Known    []string `json:"known"`
	Detail   string   `json:"detail"`
	HeldOut  int      `json:"heldout"`
	Train    int      `json:"train"`
	Draws    int      `json:"draws"`
	Distinct int      `json:"distinct"`
	Index    int      `json:"index"`
}

// gymRow is the prompts-table row of a generated problem: its id is the
// family and a hash of the question and answer (as Load's ids), its
// metadata reasoning-gym's (with source_dataset and source_index), its
// source the family and the package's version.
func gymRow(l gymLine, version string) tables.Prompt {
	h := sha256.New()
	h.Write([]byte(l.Question))
	h.Write([]byte{0})
	h.Write([]byte(l.Answer))
	return tables.Prompt{
		PromptID: l.Family + "-" + hex.EncodeToString(h.Sum(nil))[:16],
		Prompt:   l.Question,
		Answer:   l.Answer,
		Metadata: l.Metadata,
		Source:   "reasoning-gym/" + l.Family + "@" + version,
		Split:    l.Split,
	}
}

// runGym runs the generator with req and hands each line it writes to
// each; a reported problem becomes the error of its kind.
func runGym(ctx context.Context, python string, req any, fams []GymFamily, each func(gymLine) error) error {
	in, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("reasoning-gym: encode the request: %w", err)
	}
	// -s: no user site. The hash seed is fixed: a family that iterates a
	// set of strings draws the same problems run after run.
	cmd := exec.CommandContext(ctx, python, "-s", "-c", gymScript)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=0")
	cmd.Stdin = bytes.NewReader(in)
	stderr := &bounded.Tail{Max: 4 << 10}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("reasoning-gym: %w", err)
	}
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("reasoning-gym: %w", ctx.Err())
		}
		return gymErrorf(ErrNoReasoningGym, "run %s: %v: give --python the project venv (.venv-py) or another with reasoning-gym installed", python, err)
	}
	r := bufio.NewReaderSize(stdout, 1<<16)
	var reported, failed error
	for n := 1; ; n++ {
		b, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 && reported == nil && failed == nil {
			var l gymLine
			if err := json.Unmarshal(b, &l); err != nil {
				failed = fmt.Errorf("reasoning-gym: the generator's line %d is not JSON (%v): %q", n, err, shorten(string(b)))
			} else if l.Error != nil {
				reported = l.Error.err(fams, python)
			} else if err := each(l); err != nil {
				failed = err
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			failed = cmp.Or(failed, fmt.Errorf("reasoning-gym: read the generator's output: %w", err))
			break
		}
	}
	werr := cmd.Wait()
	switch {
	case reported != nil:
		return reported
	case ctx.Err() != nil:
		return fmt.Errorf("reasoning-gym: %w", ctx.Err())
	case failed != nil:
		return failed
	case werr != nil:
		return fmt.Errorf("reasoning-gym: %s failed: %v: %s", python, werr, strings.Join(stderr.Lines(1), ""))
	}
	return nil
}

// GymError is a problem with what Gym was asked for, in words for the
// user (naming the flag that asked it and the next step); errors.Is
// matches its Kind, ErrUnknownFamily and the like.
type GymError struct {
	Kind error
	Msg  string
}

func (e *GymError) Error() string { return e.Msg }
func (e *GymError) Unwrap() error { return e.Kind }

func gymErrorf(kind error, format string, args ...any) error {
	return &GymError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// err is the problem's message for the user: what was wrong, named by
// the flag that said it, and what to do.
func (e *gymError) err(fams []GymFamily, python string) error {
	args := func() string {
		for _, f := range fams {
			if f.Name == e.Family && len(f.args) > 0 {
				return "--config " + strings.Join(f.args, " --config ")
			}
		}
		return "its default config"
	}
	switch e.Code {
	case "no_package":
		return gymErrorf(ErrNoReasoningGym, "%s cannot import reasoning_gym (%s): give --python the project venv (.venv-py, made by scripts/py-venv.sh) or another with reasoning-gym installed", python, e.Detail)
	case "unknown_family":
		hint := yamlcore.Suggest(e.Family, e.Known)
		if !strings.HasPrefix(hint, "did you mean") {
			hint = fmt.Sprintf("rlpipe dataset reasoning-gym --list names all %d", len(e.Known))
		}
		return gymErrorf(ErrUnknownFamily, "reasoning-gym has no family %q (%s)", e.Family, hint)
	case "unknown_key":
		arg := e.Key
		for _, f := range fams {
			if f.Name == e.Family {
				for _, a := range f.args {
					if k, _, _ := strings.Cut(a, "="); k == e.Key || k == f.Name+"."+e.Key {
						arg = a
					}
				}
			}
		}
		return gymErrorf(ErrUnknownConfigKey, "--config %s: reasoning-gym family %s has no config key %q (%s)", arg, e.Family, e.Key, yamlcore.Suggest(e.Key, e.Known))
	case "bad_config":
		return gymErrorf(ErrBadConfig, "reasoning-gym family %s refuses %s: %s", e.Family, args(), e.Detail)
	case "too_few":
		return gymErrorf(ErrTooFewProblems, "reasoning-gym family %s gives only %d distinct questions in %d draws with %s, short of the %d rows asked of it (%d held out, %d training): lower --size, or widen its config with --config",
			e.Family, e.Distinct, e.Draws, args(), e.HeldOut+e.Train, e.HeldOut, e.Train)
	case "generate":
		return gymErrorf(ErrBadConfig, "reasoning-gym family %s fails to generate problem %d with %s: %s", e.Family, e.Index, args(), e.Detail)
	}
	return fmt.Errorf("reasoning-gym: the generator reports %q: %s", e.Code, e.Detail)
}

// shares splits total rows among weights by the largest remainder: each
// gets the floor of its exact share, and the rows left go to the largest
// fractions, the first family first on a tie.
func shares(total int, weights []float64) []int {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	out := make([]int, len(weights))
	frac := make([]float64, len(weights))
	left := total
	for i, w := range weights {
		exact := float64(total) * w / sum
		out[i] = int(math.Floor(exact))
		frac[i] = exact - float64(out[i])
		left -= out[i]
	}
	order := make([]int, len(weights))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case frac[a] > frac[b]:
			return -1
		case frac[a] < frac[b]:
			return 1
		}
		return 0
	})
	for i := 0; left > 0; i = (i + 1) % len(order) {
		out[order[i]]++
		left--
	}
	return out
}

// interleave merges the families' rows evenly: row j of a family of n
// rows sits at (j+½)/n of the way through, families in their order on a
// tie, so a prefix of the table (a first batch) holds every family in
// proportion.
func interleave(fams [][]tables.Prompt) []tables.Prompt {
	var out []tables.Prompt
	next := make([]int, len(fams))
	for {
		best := -1
		for f, rows := range fams {
			if next[f] >= len(rows) {
				continue
			}
			// (2j+1)/2n < (2k+1)/2m  ⇔  (2j+1)·m < (2k+1)·n
			if best < 0 || (2*next[f]+1)*len(fams[best]) < (2*next[best]+1)*len(rows) {
				best = f
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, fams[best][next[best]])
		next[best]++
	}
}
