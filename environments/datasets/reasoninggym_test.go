package datasets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

// gymPython is the project venv's interpreter, which holds reasoning-gym
// 0.1.25 (scripts/py-requirements.txt); the test is skipped without it.
func gymPython(t *testing.T) string {
	t.Helper()
	return pyvenv.Python(t, "generate problems with the real reasoning-gym package")
}

func gym(t *testing.T, o datasets.GymOptions) *datasets.GymSet {
	t.Helper()
	set, err := datasets.Gym(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func families(t *testing.T, list string, config ...string) []datasets.GymFamily {
	t.Helper()
	fams, err := datasets.ParseGymFamilies(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range config {
		if err := datasets.SetGymConfig(fams, c); err != nil {
			t.Fatal(err)
		}
	}
	return fams
}

func parquetBytes(t *testing.T, rows []tables.Prompt) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tables.Write(&b, tables.Prompts, rows, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGym generates two families with two seeds through the real
// reasoning-gym: each family gets its weighted share of each split, the
// rows keep reasoning-gym's metadata, held-out and training rows share no
// question, the same options give byte-identical tables, and seeds far
// apart give other problems.
func TestGym(t *testing.T) {
	py := gymPython(t)
	type count struct{ held, train int }
	for _, tc := range []struct {
		name        string
		families    string
		config      []string
		size, held  int
		seed        int64
		want        map[string]count
		firstHeld   string // the first held-out row's question and answer
		heldSources string // the held-out rows' families, in order
		locale      string // LC_ALL for the generator
	}{
		{name: "two families, seed 1", families: "chain_sum,basic_arithmetic", size: 12, held: 4, seed: 1,
			want:        map[string]count{"chain_sum": {2, 4}, "basic_arithmetic": {2, 4}},
			firstHeld:   "State the final answer to the following arithmetic problem: 4 - 1 - 7 = → -4",
			heldSources: "chain_sum basic_arithmetic chain_sum basic_arithmetic"},
		{name: "weighted, seed 1000000", families: "number_sorting:3,chain_sum", config: []string{"number_sorting.max_numbers=4"},
			size: 20, held: 5, seed: 1_000_000,
			want:        map[string]count{"number_sorting": {4, 11}, "chain_sum": {1, 4}},
			heldSources: "number_sorting number_sorting chain_sum number_sorting number_sorting"},
		// Emoji in the questions and the metadata come through whatever
		// the locale: the protocol is UTF-8.
		{name: "emoji under the C locale", families: "emoji_mystery", size: 2, held: 1, seed: 1, locale: "C",
			want: map[string]count{"emoji_mystery": {1, 1}}, heldSources: "emoji_mystery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.locale != "" {
				t.Setenv("LC_ALL", tc.locale)
				t.Setenv("LANG", tc.locale)
			}
			o := datasets.GymOptions{Python: py, Families: families(t, tc.families, tc.config...), Size: tc.size, HeldOut: tc.held, Seed: tc.seed}
			set := gym(t, o)
			if set.Version != "0.1.25" {
				t.Errorf("version %q, want the pinned 0.1.25", set.Version)
			}
			got := map[string]count{}
			questions := map[string]string{}
			var heldSources []string
			for _, split := range []struct {
				name string
				rows []tables.Prompt
			}{{datasets.GymSplitHeldOut, set.HeldOut}, {datasets.GymSplitTrain, set.Train}} {
				for i, r := range split.rows {
					fam, version, ok := strings.Cut(strings.TrimPrefix(r.Source, "reasoning-gym/"), "@")
					if !ok || version != set.Version {
						t.Fatalf("%s row %d: source %q, want reasoning-gym/FAMILY@%s", split.name, i, r.Source, set.Version)
					}
					c := got[fam]
					if split.name == datasets.GymSplitHeldOut {
						c.held++
						heldSources = append(heldSources, fam)
					} else {
						c.train++
					}
					got[fam] = c
					if r.Split != split.name || !strings.HasPrefix(r.PromptID, fam+"-") || len(r.PromptID) != len(fam)+17 || r.Prompt == "" || r.Answer == "" {
						t.Fatalf("%s row %d: %+v", split.name, i, r)
					}
					var meta struct {
						Family string `json:"source_dataset"`
						Index  *int   `json:"source_index"`
					}
					if err := json.Unmarshal([]byte(r.Metadata), &meta); err != nil || meta.Family != fam || meta.Index == nil {
						t.Fatalf("%s row %d: metadata %s (%v), want reasoning-gym's with source_dataset %s", split.name, i, r.Metadata, err, fam)
					}
					if prev, dup := questions[r.Prompt]; dup {
						t.Fatalf("%s row %d repeats the question of %s", split.name, i, prev)
					}
					questions[r.Prompt] = split.name
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("rows by family (held out, training): %v, want %v", got, tc.want)
			}
			for f, c := range tc.want {
				if got[f] != c {
					t.Fatalf("rows by family (held out, training): %v, want %v", got, tc.want)
				}
			}
			for _, c := range set.Counts {
				if w := tc.want[c.Family]; c.HeldOut != w.held || c.Train != w.train {
					t.Fatalf("Counts %+v, want %v", set.Counts, tc.want)
				}
			}
			if len(set.Counts) != len(tc.want) {
				t.Fatalf("Counts %+v, want %v", set.Counts, tc.want)
			}
			if s := strings.Join(heldSources, " "); s != tc.heldSources {
				t.Errorf("held-out families in order: %s, want %s", s, tc.heldSources)
			}
			if tc.locale != "" && (!strings.Contains(set.HeldOut[0].Metadata, `"emoji": "😗"`) || !strings.Contains(set.HeldOut[0].Prompt, "😗")) {
				t.Errorf("the first held-out row lost its emoji: %q %s", set.HeldOut[0].Prompt, set.HeldOut[0].Metadata)
			}
			if tc.firstHeld != "" {
				if s := set.HeldOut[0].Prompt + " → " + set.HeldOut[0].Answer; s != tc.firstHeld {
					t.Errorf("first held-out row %q, want %q (reasoning_gym.create_dataset(\"chain_sum\", seed=1)[0])", s, tc.firstHeld)
				}
			}
			again := gym(t, o)
			if !bytes.Equal(parquetBytes(t, set.Train), parquetBytes(t, again.Train)) || !bytes.Equal(parquetBytes(t, set.HeldOut), parquetBytes(t, again.HeldOut)) {
				t.Fatal("the same options gave other tables")
			}
		})
	}
}

// TestGymErrors: each problem with the families, the config or the sizes
// asked for is an error naming the flag and what to do, of its kind.
func TestGymErrors(t *testing.T) {
	py := gymPython(t)
	broken := t.TempDir() // a reasoning_gym that does not import
	if err := os.MkdirAll(filepath.Join(broken, "reasoning_gym"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "reasoning_gym", "__init__.py"), []byte(`raise ImportError("broken on purpose")`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		families   string
		config     []string
		size, held int
		pythonPath string
		fams       []datasets.GymFamily // given to Gym as they are, not parsed
		kind       error
		want       string
	}{
		{name: "negative weight", fams: []datasets.GymFamily{{Name: "chain_sum", Weight: -1}}, size: 10, held: 2, kind: datasets.ErrBadConfig,
			want: `family chain_sum: the weight -1 is not a positive number`},
		{name: "family twice", fams: []datasets.GymFamily{{Name: "chain_sum"}, {Name: "chain_sum", Weight: 2}}, size: 10, held: 2, kind: datasets.ErrBadConfig,
			want: `family chain_sum is asked for twice`},
		{name: "unknown family, close", families: "chain_sum,chain_sums", size: 10, held: 2, kind: datasets.ErrUnknownFamily,
			want: `reasoning-gym has no family "chain_sums" (did you mean "chain_sum"?)`},
		// composite mixes families (rlpipe mixes them itself), so it is not
		// one here; no family is near its name.
		{name: "unknown family, far", families: "composite", size: 10, held: 2, kind: datasets.ErrUnknownFamily,
			want: `reasoning-gym has no family "composite" (rlpipe dataset reasoning-gym --list names all 105)`},
		{name: "unknown config key", families: "chain_sum", config: []string{"min_term=2"}, size: 10, held: 2, kind: datasets.ErrUnknownConfigKey,
			want: `--config min_term=2: reasoning-gym family chain_sum has no config key "min_term" (did you mean "min_terms"?)`},
		{name: "unknown key of one family", families: "chain_sum,number_sorting", config: []string{"number_sorting.bogus=1"}, size: 10, held: 2, kind: datasets.ErrUnknownConfigKey,
			want: `--config number_sorting.bogus=1: reasoning-gym family number_sorting has no config key "bogus" (known keys: max_decimals, max_numbers, max_value, min_decimals, min_numbers, min_value)`},
		{name: "config the family refuses", families: "chain_sum", config: []string{"min_terms=0"}, size: 10, held: 2, kind: datasets.ErrBadConfig,
			want: `reasoning-gym family chain_sum refuses --config min_terms=0: AssertionError: min_terms must be positive`},
		{name: "too few distinct problems", families: "chain_sum", config: []string{"max_terms=2", "max_digits=1"}, size: 1000, held: 100, kind: datasets.ErrTooFewProblems,
			want: `reasoning-gym family chain_sum gives only 200 distinct questions in 3000 draws with --config max_terms=2 --config max_digits=1, short of the 1000 rows asked of it (100 held out, 900 training): lower --size, or widen its config with --config`},
		{name: "size too large", families: "chain_sum", size: 100_001, held: 2, kind: datasets.ErrInvalid,
			want: `--size 100001 is out of range: give 2 to 100000 rows (held out and training together)`},
		{name: "size too small", families: "chain_sum", size: 1, held: 1, kind: datasets.ErrInvalid,
			want: `--size 1 is out of range: give 2 to 100000 rows (held out and training together)`},
		{name: "all held out", families: "chain_sum", size: 10, held: 10, kind: datasets.ErrInvalid,
			want: `--heldout 10 of --size 10 leaves no held-out or no training row: give 1 to 9, or a fraction`},
		{name: "no reasoning_gym", families: "chain_sum", size: 10, held: 2, pythonPath: broken, kind: datasets.ErrNoReasoningGym,
			want: py + ` cannot import reasoning_gym (ImportError: broken on purpose): give --python the project venv (.venv-py, made by scripts/py-venv.sh) or another with reasoning-gym installed`},
		{name: "no interpreter", families: "chain_sum", size: 10, held: 2, kind: datasets.ErrNoReasoningGym,
			want: `run /nonexistent/python: fork/exec /nonexistent/python: no such file or directory: give --python the project venv (.venv-py) or another with reasoning-gym installed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pythonPath != "" {
				t.Setenv("PYTHONPATH", tc.pythonPath)
			}
			python := py
			if tc.name == "no interpreter" {
				python = "/nonexistent/python"
			}
			fams := tc.fams
			if fams == nil {
				fams = families(t, tc.families, tc.config...)
			}
			o := &datasets.GymOptions{Python: python, Families: fams, Size: tc.size, HeldOut: tc.held, Seed: 1}
			_, err := datasets.Gym(context.Background(), o)
			if err == nil || err.Error() != tc.want || !errors.Is(err, tc.kind) {
				t.Fatalf("error %v\nwant %s (%v)", err, tc.want, tc.kind)
			}
		})
	}
}

// TestGymFlags refuses a family list or a --config argument that does
// not parse, before any Python runs.
func TestGymFlags(t *testing.T) {
	for _, tc := range []struct {
		name, families, config, want string
	}{
		{name: "empty family", families: "chain_sum,", want: `families "chain_sum,": an empty family name; give FAMILY[:WEIGHT][,FAMILY[:WEIGHT]…]`},
		{name: "bad weight", families: "chain_sum:x", want: `family "chain_sum:x": the weight "x" is not a positive number`},
		{name: "zero weight", families: "chain_sum:0", want: `family "chain_sum:0": the weight "0" is not a positive number`},
		{name: "family twice", families: "chain_sum,chain_sum:2", want: `families "chain_sum,chain_sum:2": chain_sum is given twice`},
		{name: "no value", families: "chain_sum", config: "max_terms", want: `--config "max_terms": want KEY=VALUE or FAMILY.KEY=VALUE`},
		{name: "other family", families: "chain_sum", config: "gcd.max_value=3", want: `--config gcd.max_value=3: gcd is not one of the families asked for (chain_sum)`},
		{name: "seed", families: "chain_sum", config: "seed=3", want: `--config seed=3: "seed" is not a config key here; the seed is --seed and the number of rows --size`},
		{name: "not finite", families: "chain_sum", config: "max_terms=NaN", want: `--config max_terms=NaN: NaN is not a finite number`},
		{name: "bad JSON", families: "chain_sum", config: "max_terms=[1,", want: `--config max_terms=[1,: [1, is not JSON: unexpected end of JSON input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fams, err := datasets.ParseGymFamilies(tc.families)
			if err == nil && tc.config != "" {
				err = datasets.SetGymConfig(fams, tc.config)
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, datasets.ErrBadConfig) {
				t.Fatalf("error %v\nwant %s", err, tc.want)
			}
		})
	}
	fams := families(t, "chain_sum,number_sorting", "max_value=9", "chain_sum.allow_negation=false", "number_sorting.min_value=-2.5", `number_sorting.x=[1,"a"]`, "chain_sum.y=word")
	b, err := json.Marshal(fams)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"Name":"chain_sum","Weight":1,"Config":{"allow_negation":false,"max_value":9,"y":"word"}},{"Name":"number_sorting","Weight":1,"Config":{"max_value":9,"min_value":-2.5,"x":[1,"a"]}}]`
	if string(b) != want {
		t.Fatalf("config values:\n%s\nwant\n%s", b, want)
	}
}

// TestGymFaults runs the generator against a stand-in reasoning_gym
// (testdata/fakegym) whose families misbehave: one raises on a problem,
// one puts NaN in its metadata, one dies; each is an error naming the
// family and the problem, and nothing is returned. One that hangs ends
// when the context is cancelled. A family with an int
// answer, a set and a tuple in its metadata and repeated questions gives
// JSON rows and skips the repeats.
func TestGymFaults(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the stand-in reasoning_gym with")
	}
	fake, err := filepath.Abs("testdata/fakegym")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	for _, tc := range []struct {
		name, family string
		kind         error
		want         string
	}{
		{"raises", "raises", datasets.ErrBadConfig, "reasoning-gym family raises fails to generate problem 2 with its default config: ValueError: boom at 2"},
		{"NaN in the metadata", "nan", datasets.ErrBadConfig, "reasoning-gym family nan fails to generate problem 0 with its default config: metadata: Out of range float values are not JSON compliant"},
		{"dies", "dies", nil, "reasoning-gym: " + py + " failed: exit status 7: dying on purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := datasets.Gym(context.Background(), &datasets.GymOptions{Python: py, Families: families(t, tc.family), Size: 3, HeldOut: 1, Seed: 1})
			if err == nil || err.Error() != tc.want || (tc.kind != nil && !errors.Is(err, tc.kind)) || set != nil {
				t.Fatalf("Gym = %v, %v\nwant the error %s", set, err, tc.want)
			}
		})
	}
	// A generator that hangs ends with the context: rlpipe's Ctrl-C.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := datasets.Gym(ctx, &datasets.GymOptions{Python: py, Families: families(t, "hangs"), Size: 3, HeldOut: 1, Seed: 1}); err == nil ||
		err.Error() != "reasoning-gym: context canceled" || !errors.Is(err, context.Canceled) {
		t.Fatalf("a hanging generator, cancelled: %v", err)
	}
	set := gym(t, datasets.GymOptions{Python: py, Families: families(t, "odd"), Size: 3, HeldOut: 1, Seed: 1})
	var got []string
	for _, r := range append(set.HeldOut, set.Train...) {
		got = append(got, r.Prompt+" "+r.Answer+" "+r.Metadata+" "+r.Source)
	}
	want := []string{
		`odd 0? 0 {"pair": [1, 2], "source_dataset": "odd", "source_index": 0, "tags": ["a", "b"]} reasoning-gym/odd@fake`,
		`odd 1? 10 {"pair": [1, 2], "source_dataset": "odd", "source_index": 1, "tags": ["a", "b"]} reasoning-gym/odd@fake`,
		`odd 2? 20 {"pair": [1, 2], "source_dataset": "odd", "source_index": 2, "tags": ["a", "b"]} reasoning-gym/odd@fake`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
