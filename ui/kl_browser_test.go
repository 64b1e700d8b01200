package ui_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts/rolloutstest"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/ui"
)

// betaZeroRun makes a run "beta0" of 2 iterations whose train stage is
// the real GRPO trainer of the embedded model at β = 0, which writes
// "kl": null in train_metrics.json: the KL to the base model is not part
// of the loss and is never computed. The model samples 4 completions of
// at most 5 tokens for 3 stand-in prompts per iteration, rewarded by the
// stand-in reward (1 unless the completion ends in 0).
func betaZeroRun(t *testing.T) artifacts.Store {
	t.Helper()
	st := standintest.NewStore(t, 12)
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	s := standin.Stages(standin.Options{})
	stages := pipeline.Stages{Sample: s.Sample, Generate: rolloutstest.EmbeddedGenerate(t, m, 4), Reward: s.Reward, Train: embedded.Task(m, embedded.Options{Beta: 0})}
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	cfg := pipeline.LoopConfig{Iterations: 2, BatchSize: 3, Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}
	standintest.Loop(t, st, pipeline.RunOptions{Name: "beta0", Seed: 1, WorkDir: t.TempDir(), ConfigHash: "sha256:test",
		Envs: map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick}}, cfg, stages)
	return st
}

// At β = 0 the KL panel of the run view says why it is empty — "not
// computed: at beta 0 the loss has no KL term" — and draws no line and no
// point (no 0 that looks measured); kl is not offered among the other
// metrics to chart, and the iteration view lists no kl value. The run is
// the real trainer's (betaZeroRun), so the null is the one it writes.
func TestBrowserKLNotComputed(t *testing.T) {
	chromium := findChromium(t)
	st := betaZeroRun(t)
	api := newHandler(t, st, nil)
	var d ui.RunDetail
	if code := get(t, api, "/api/runs/beta0", &d); code != http.StatusOK || len(d.Iterations) != 2 {
		t.Fatalf("GET /api/runs/beta0: %d, %d iterations; want 200 and 2", code, len(d.Iterations))
	}
	for _, it := range d.Iterations {
		if _, ok := it.Train["kl"]; ok || !slices.Contains(it.NotComputed, "kl") {
			t.Fatalf("iteration %d: train %v, not computed %v; want the trainer's kl null, not computed", it.Iteration, it.Train, it.NotComputed)
		}
		if _, ok := it.Train["loss"]; !ok {
			t.Fatalf("iteration %d: no loss in %v: the trainer wrote no metrics", it.Iteration, it.Train)
		}
	}

	// The trainer's options as it applied them, defaults filled in:
	// the config left them out.
	if d.Trainer == nil || d.Trainer.Iteration != 2 || d.Trainer.Path != "iterations/000002/adapter/trainer_state.json" {
		t.Fatalf("trainer options %+v, want iteration 2's", d.Trainer)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := "http://" + serveUI(ctx, t, st, time.Second) + "/"
	page := openPage(ctx, t, chromium)

	page.navigate(ctx, t, base+"#/runs/beta0")
	var kl struct {
		Captions []string // every chart's title
		Note     string   // the KL panel's text
		Lines    int      // polylines in the KL panel
		Points   int      // points in the KL panel
		Series   []string // series named kl, in any chart
		Loss     int      // points of the loss panel: the page drew the run
		Picker   []string // the other metrics offered
	}
	page.waitFor(ctx, t, &kl, `(() => {
		const figs = [...document.querySelectorAll('figure.chart')];
		const chart = (title) => figs.find((f) => f.querySelector('figcaption').textContent === title);
		const k = chart('KL'), loss = chart('loss');
		if (!k || !loss) return null;
		return {captions: figs.map((f) => f.querySelector('figcaption').textContent),
			note: k.querySelector('svg').textContent,
			lines: k.querySelectorAll('polyline').length,
			points: k.querySelectorAll('circle').length,
			series: [...document.querySelectorAll('g.series')].map((g) => g.dataset.name).filter((n) => n === 'kl'),
			loss: loss.querySelectorAll('circle.pt').length,
			picker: [...document.querySelectorAll('.picker option')].map((o) => o.value).filter((v) => v)};
	})()`)
	if kl.Note != "not computed: at beta 0 the loss has no KL term" {
		t.Errorf("the KL panel says %q, want it not computed at beta 0 (charts %v)", kl.Note, kl.Captions)
	}
	if kl.Lines != 0 || kl.Points != 0 || len(kl.Series) != 0 {
		t.Errorf("the KL panel draws %d lines and %d points, and %d series are named kl; want none: kl was not computed", kl.Lines, kl.Points, len(kl.Series))
	}
	if kl.Loss != 2 {
		t.Errorf("the loss panel has %d points, want one per iteration (2)", kl.Loss)
	}
	if slices.Contains(kl.Picker, "kl") {
		t.Errorf("kl is offered to chart among %v", kl.Picker)
	}

	// The effective trainer options, defaults filled in: β, the clip ε
	// and the LoRA rank the run trained with, though its config names none.
	var opts map[string]string
	page.waitFor(ctx, t, &opts, `(() => {
		const rows = [...document.querySelectorAll('details.trainer-options tr[data-key]')];
		return rows.length ? Object.fromEntries(rows.map((r) => [r.dataset.key, r.querySelector('td:last-child').textContent])) : null;
	})()`)
	for k, want := range map[string]string{"beta": "0", "eps_low": "0.2", "eps_high": "0.2", "lora.rank": "8", "lora.alpha": "16", "lr": "0.001", "aggregation": "token"} {
		if opts[k] != want {
			t.Errorf("trainer option %s = %q, want %q (all: %v)", k, opts[k], want, opts)
		}
	}
	page.eval(ctx, t, `document.querySelector('details.trainer-options').open = true`, nil)
	keepScreenshot(ctx, t, page, "trainer-options.png")

	// The iteration view lists the train metrics the trainer computed: no
	// kl among them.
	page.navigate(ctx, t, base+"#/runs/beta0/iterations/2")
	var metrics []string
	page.waitFor(ctx, t, &metrics, `(() => {
		const rows = [...document.querySelectorAll('table.kv tbody tr')];
		return rows.length ? rows.map((r) => r.querySelector('td').textContent) : null;
	})()`)
	if slices.Contains(metrics, "kl") || !slices.Contains(metrics, "loss") {
		t.Errorf("the iteration view lists train metrics %v; want loss and no kl", metrics)
	}
}
