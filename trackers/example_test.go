package trackers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rlpipe/rlpipe/trackers"
)

// A tracker named as `rlpipe track --to` names it, started for a run and
// sent one iteration's point: TensorBoard writes an event file in
// DIR/<run>.
func Example() {
	dir, _ := os.MkdirTemp("", "tb")
	defer os.RemoveAll(dir)

	backends := trackers.Backends{trackers.TensorBoardBackend, trackers.MLflowBackend}
	spec, err := backends.ParseTarget("tensorboard:" + dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	t, err := backends.Open(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	run, _ := trackers.NewRun("arith", []byte("run: arith\niterations: 3\n"), "sha256:…")
	if err := t.Start(ctx, run); err != nil {
		fmt.Println(err)
		return
	}
	p := trackers.Point{Step: 1, Time: time.Unix(1_800_000_000, 0),
		Scalars: map[string]float64{"train/loss": 0.25, "reward/correct": 0.5},
		Text:    map[string]string{trackers.TagCommit: "4f2a…"}}
	if err := t.Log(ctx, []trackers.Point{p}); err != nil {
		fmt.Println(err)
		return
	}
	if err := t.End(ctx, trackers.Outcome{Status: trackers.Finished}); err != nil {
		fmt.Println(err)
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "arith", "events.out.tfevents.*"))
	fmt.Println(len(files), "event file;", "params:", run.Params, "; tags:", p.Tags())
	// Output:
	// 1 event file; params: map[iterations:3 run:arith] ; tags: [reward/correct train/loss]
}

// ParseTarget reads what `rlpipe track --to` takes.
func ExampleBackends_ParseTarget() {
	backends := trackers.Backends{trackers.TensorBoardBackend, trackers.MLflowBackend, trackers.WandbBackend}
	for _, s := range []string{"tensorboard:tb", "mlflow:http://127.0.0.1:5000", "wandb:wb", "neptune:x"} {
		spec, err := backends.ParseTarget(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(spec)
	}
	// Output:
	// tensorboard:tb
	// mlflow:http://127.0.0.1:5000
	// wandb:wb
	// tracker "neptune:x": unknown tracker kind "neptune" (use mlflow or tensorboard or wandb)
}
