package driver

import (
	"errors"
	"testing"
)

func TestMeaningful(t *testing.T) {
	for key, want := range map[string]bool{
		"iterations":                           false,
		"eval.every":                           false,
		"environments.train.retries.attempts":  false,
		"tracking":                             false,
		"overlap.max_staleness":                false,
		"machine.cpu":                          false,
		"policy.base_url":                      false,
		"stages.generate.env":                  false,
		"stages.train.settings.timeout":        false,
		"seed":                                 true,
		"dataset":                              true,
		"batch_size":                           true,
		"trainer.lr":                           true,
		"trainer.loss":                         true,
		"advantages.estimator":                 true,
		"stages.reward.spec":                   true,
		"stages.generate.sampling.temperature": true,
		"policy.model":                         true,
		"eval.k":                               true,
		"eval.set":                             true,
		"a_section_of_a_new_kind.key":          true,
	} {
		if got := Meaningful(key); got != want {
			t.Errorf("Meaningful(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestCheckConfigChange(t *testing.T) {
	recorded := []byte("# effective pipeline config\nseed: 1\niterations: 3\ntrainer: {lr: 0.002}\neval: {every: 10, k: [1, 4]}\n")
	for _, tc := range []struct {
		name    string
		body    string
		allow   bool
		changes string
		err     string
	}{
		{"harmless", "seed: 1\niterations: 6\ntrainer: {lr: 0.002}\neval: {every: 5, k: [1, 4]}\n", false,
			"eval.every 10 → 5, iterations 3 → 6", ""},
		{"meaningful", "seed: 1\niterations: 6\ntrainer: {lr: 0.001}\neval: {every: 10, k: [1, 8]}\n", false,
			"eval.k [1,4] → [1,8], iterations 3 → 6, trainer.lr 0.002 → 0.001",
			"run r: the config changes what the run's committed iterations mean: eval.k [1,4] → [1,8], trainer.lr 0.002 → 0.001 (also changed: iterations 3 → 6)\n" +
				"hint: start a new run (--run NAME), put the recorded values back (rlpipe cat runs-r@:run/config.yaml), or resume anyway with --allow-config-change"},
		{"meaningful, allowed", "iterations: 3\ntrainer: {lr: 0.002, beta: 0.1}\neval: {every: 10, k: [1, 4]}\n", true,
			"seed 1 → (unset), trainer.beta (unset) → 0.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := checkConfigChange("r", recorded, []byte(tc.body), tc.allow)
			if got := joinChanges(changes); got != tc.changes {
				t.Errorf("changes %q, want %q", got, tc.changes)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, ErrConfigChanged)):
				t.Errorf("error\n%v\nwant\n%s", err, tc.err)
			}
		})
	}
}
