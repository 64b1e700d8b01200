package trl_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/internal/benchstat"
)

// algorithm is a line of the algorithms' table: the changes to the
// demo's config that select it.
type algorithm struct {
	name string
	// advantages is the `advantages:` section's flow map ("" for none:
	// GRPO).
	advantages string
	// trainer holds keys added to the demo's `trainer: {lr: 2.0e-3}`.
	trainer string
	// extra is YAML appended to the config (top-level sections a line
	// needs, such as a critic's).
	extra string
}

// algorithms are the shipped estimator and loss combinations the demo
// runs under, one line each; a new one is one more line.
var algorithms = []algorithm{
	{name: "grpo"},
	{name: "dr_grpo", advantages: "{estimator: dr_grpo}", trainer: "aggregation: seq_mean_token_sum_norm"},
	{name: "rloo", advantages: "{estimator: rloo}"},
	{name: "reinforce_plus_plus_baseline", advantages: "{estimator: reinforce_plus_plus_baseline}"},
	{name: "gspo", trainer: "loss: gspo, aggregation: sequence"},
	{name: "cispo", trainer: "loss: cispo"},
	// CISPO as its paper runs it, without a lower bound on the weight
	// (docs/TRAINERS.md, "CISPO off-policy").
	{name: "cispo_no_lower_bound", trainer: "loss: cispo, eps_low: 0.99, eps_high: 0.28"},
	// PPO: GAE's per-token advantages from a LoRA critic (its defaults).
	{name: "ppo", advantages: "{estimator: gae}", trainer: "critic: {}"},
}

// algIterations is the demo cut to 20 iterations (RLPIPE_BENCH_ALG_ITERATIONS
// sets another number).
const algIterations = 20

// BenchmarkAlgorithms runs the arithmetic demo (its config with 20
// iterations and no eval during the run; the same seed, overlap and
// hyperparameters for every line) under each algorithm of the table and
// reports, per algorithm, the held-out exact pass@1 of the last adapter
// (rlpipe's evaluator on the 500 held-out problems), its gain over the
// base model, and the median seconds an iteration (iterations 2 on) and
// the whole run's.
func BenchmarkAlgorithms(b *testing.B) {
	iterations := countFromEnv(b, "RLPIPE_BENCH_ALG_ITERATIONS", algIterations)
	h := newHarness(b)
	for _, alg := range algorithms {
		b.Run(alg.name, func(b *testing.B) {
			r := h.run(b, demo{run: "alg-" + alg.name, seed: 1, iterations: iterations, staleness: 1, alg: alg})
			held := h.exactPass(b, r.adapter)
			b.Logf("%s: held-out exact pass@1 %.4f → %.4f (%+.4f) after %d iterations, %.1f ms an iteration, %.1f s the run",
				alg.name, h.base, held, held-h.base, iterations, 1000*benchstat.Median(totals(r.steps)), r.wall.Seconds())
			b.ReportMetric(held, "heldout")
			b.ReportMetric(held-h.base, "gain")
			b.ReportMetric(benchstat.Median(totals(r.steps)), "s/iteration")
			b.ReportMetric(r.wall.Seconds(), "s/run")
			b.ReportMetric(0, "ns/op")
		})
	}
}
