package driver_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts"
	_ "github.com/rlpipe/rlpipe/artifacts/local" // the embedded store, for plain paths
	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// ExampleRun runs a stand-in pipeline twice: once, and then under another
// name, where every task call is a cache hit.
func ExampleRun() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rlpipe-driver-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := artifacts.Create(ctx, filepath.Join(dir, "store"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := standin.PutDataset(ctx, st, "main", "data/prompts.parquet", 16); err != nil {
		log.Fatal(err)
	}
	cfg, err := config.Parse("pipeline.yaml", []byte(`run: exp1
iterations: 2
batch_size: 4
dataset: main:data/prompts.parquet
stages:
  sample: {kind: standin}
  generate: {kind: standin, samples_per_prompt: 2}
  reward: {kind: standin}
  train: {kind: standin}
`), kinds.Registry())
	if err != nil {
		log.Fatal(err)
	}

	for _, name := range []string{"", "exp2"} {
		sum, err := driver.Run(ctx, st, cfg, driver.Options{Name: name})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: iteration %d of %d, %d new; %d task calls, %d cached\n",
			sum.Branch, sum.Iterations, sum.Planned, sum.NewIterations, sum.Tasks, sum.Cached)
	}
	// Output:
	// runs-exp1: iteration 2 of 2, 2 new; 10 task calls, 0 cached
	// runs-exp2: iteration 2 of 2, 2 new; 10 task calls, 10 cached
}
