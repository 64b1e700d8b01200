// Package trl puts rlpipe beside a peer: TRL's GRPOTrainer trains the
// exported tiny-arith (PEFT LoRA of the same rank) on the arithmetic
// demo's prompts, reward, group size, batch, learning rate, temperature
// and steps (testdata/trl_grpo.py), against `rlpipe run` of the same
// configuration with overlap off, so that both are on-policy.
// BenchmarkTRLvsRlpipe reports seconds a step of each and their ratio,
// and CPU seconds a step of each and theirs (every thread of each side's
// process over the same spans: the figure a busy machine moves least),
// measured in rounds that alternate which goes first, one seed a round,
// where rlpipe's step goes (each stage's mean and the rest: engine,
// commit, events), and the held-out exact pass@1 of both after the same
// steps, both evaluated by rlpipe's evaluator (tiny.ExactPass) on each
// one's final adapter. BenchmarkAlgorithms runs the demo, cut to 20
// iterations, under each shipped estimator and loss (a table of
// configs) and reports each one's held-out gain and time.
//
// BenchmarkTRLvsRlpipe needs a python that imports trl, peft, datasets
// and accelerate (RLPIPE_PEER_PYTHON, or the project venv) and is
// skipped, saying so, without one; BenchmarkAlgorithms needs none.
// bench/README.md has the figures and the choices behind them.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/trl/
package trl
