package cli

import (
	"strings"
	"testing"
)

// TestRunOverrides: key.path=value arguments and --set override the
// file, the run records the config with them, and a resume that changes
// keys names each old → new: iterations and environments pass with the
// note, the seed (what earlier iterations mean) is refused unless
// --allow-config-change.
func TestRunOverrides(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	var first runOut
	h.json(&first, "run", "-f", cfg, "--no-report", "iterations=1", "--set", "stages.generate.samples_per_prompt=2", "--set", "environments.train.retries={attempts: 2}")
	if first.Iterations != 1 || first.Planned != 1 {
		t.Fatalf("run: %+v, want 1 iteration", first.Summary)
	}
	recorded := h.ok("cat", "runs-standin@:run/config.yaml")
	for _, want := range []string{"iterations: 1\n", "samples_per_prompt: 2\n", "    retries:\n      attempts: 2\n"} {
		if !strings.Contains(recorded, want) {
			t.Errorf("run/config.yaml lacks %q:\n%s", want, recorded)
		}
	}

	// Harmless changes: a warning that names them, and the run goes on.
	r := h.run("run", "-f", cfg, "--no-report", "iterations=2", "--set", "stages.generate.samples_per_prompt=2", "environments.train.retries={attempts: 3}")
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if want := "the pipeline config differs from the run's recorded one: environments.train.retries.attempts 2 → 3, iterations 1 → 2; the next committed iteration records the new one"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}

	// A change of what the committed iterations mean is refused, every
	// change named; --allow-config-change resumes anyway.
	args := []string{"run", "-f", cfg, "--no-report", "iterations=3", "seed=8", "--set", "stages.generate.samples_per_prompt=2", "environments.train.retries={attempts: 3}"}
	got := h.fails(ExitFailure, nil, args...)
	want := "rlpipe: run standin: the config changes what the run's committed iterations mean: seed 7 → 8 (also changed: iterations 2 → 3)\n" +
		"hint: start a new run (--run NAME), put the recorded values back (rlpipe cat runs-standin@:run/config.yaml), or resume anyway with --allow-config-change\n"
	if got != want {
		t.Errorf("stderr\n%q\nwant\n%q", got, want)
	}
	var allowed runOut
	h.json(&allowed, append(args, "--allow-config-change")...)
	if allowed.Iterations != 3 || allowed.NewIterations != 1 {
		t.Errorf("with --allow-config-change: %+v, want iteration 3, 1 new", allowed.Summary)
	}
}

// TestOverrideErrors: an override's problem names the override, with the
// config's own hint, in every command that takes -f; an argument that is
// not key=value is a usage error.
func TestOverrideErrors(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	arith := h.file("arith.yaml", arithExample(t, nil))
	for _, tc := range []struct {
		name string
		code int
		args []string
		want string
	}{
		{"run: a wrong type", ExitFailure, []string{"run", "-f", cfg, "iterations=abc"},
			"rlpipe: override iterations=abc: iterations: expected an integer, got \"abc\"\n"},
		{"run: an unknown key with a hint", ExitFailure, []string{"run", "-f", cfg, "--set", "stages.generate.samples_per_promt=2"},
			"rlpipe: override stages.generate.samples_per_promt=2: unknown key \"samples_per_promt\" in stages.generate (did you mean \"samples_per_prompt\"?)\n"},
		{"run: a section's key (the trainer's)", ExitFailure, []string{"run", "-f", arith, "trainer.lr=abc"},
			"rlpipe: override trainer.lr=abc: trainer.lr: expected a number, got \"abc\"\n"},
		{"run: a flow mapping's unknown key", ExitFailure, []string{"run", "-f", arith, "stages.generate.sampling={temperature: 0.7, top_k: 5}"},
			"rlpipe: override stages.generate.sampling={temperature: 0.7, top_k: 5}: unknown key \"top_k\" in stages.generate.sampling"},
		{"run: not an override", ExitUsage, []string{"run", "-f", cfg, "fast"},
			"rlpipe: run: unexpected argument \"fast\": an override is key.path=value, e.g. trainer.lr=1e-6\n"},
		{"eval", ExitFailure, []string{"eval", "-f", cfg, "eval.every=x"},
			"rlpipe: override eval.every=x: eval.every: expected an integer, got \"x\"\n"},
		{"worker", ExitFailure, []string{"worker", "-f", cfg, "--env", "train", "batch_size=0"},
			"rlpipe: override batch_size=0: batch_size: must be at least 1, got 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(tc.args...)
			if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr\n%s\nwant exit %d and stderr starting\n%s", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
}
