package temporalrun_test

import (
	"context"
	"log"

	"go.temporal.io/sdk/client"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// Example wires both halves: a worker process that serves environment
// "generate" of a pipeline, and a driver whose run sends that
// environment's calls to it. Both open the same store (a lakeFS
// repository) and build the same stages; rlpipe worker and rlpipe run
// --executor temporal do this from pipeline.yaml.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{HostPort: temporalrun.DefaultAddress})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	st, err := artifacts.Open(ctx, "lakefs://rl", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	var stages pipeline.Stages // the pipeline's tasks, e.g. from config.Plan
	envs := map[string]pipeline.Settings{"generate": {Retry: pipeline.Retry{Attempts: 3}}}

	// On a GPU host: run attempts of the generate environment.
	w, err := pipeline.NewWorker(st, pipeline.WorkerOptions{Tasks: stages.Tasks(), Envs: envs})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		err := temporalrun.Serve(ctx, temporalrun.WorkerOptions{Client: c, Repository: "rl", Pipeline: "p1",
			Envs: []string{"generate"}, Worker: w})
		if err != nil {
			log.Fatal(err)
		}
	}()

	// On the driver: the same loop as ever, with another executor.
	x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: "rl", Pipeline: "p1", Store: st})
	if err != nil {
		log.Fatal(err)
	}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "exp1", Envs: envs, Executor: x})
	if err != nil {
		log.Fatal(err)
	}
	defer run.Close()
	_, err = run.Loop(ctx, pipeline.LoopConfig{Iterations: 10, BatchSize: 64, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}, stages)
	if err != nil {
		log.Fatal(err)
	}
}
