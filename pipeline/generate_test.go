package pipeline_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// TestGenerateTaskChecksItsTrajectories runs a generate task that writes a
// trajectories table and one that writes another table in its place: the
// first commits runs.TrajectoriesFile, the second fails with ErrOutput.
func TestGenerateTaskChecksItsTrajectories(t *testing.T) {
	cases := []struct {
		name  string
		write func(path string) error
		err   string
	}{
		{"trajectories", func(path string) error {
			return tables.WriteFile(path, tables.Trajectories, []tables.Trajectory{{PromptID: "p1", Status: "ok"}}, nil)
		}, ""},
		{"prompts in their place", func(path string) error {
			return tables.WriteFile(path, tables.Prompts, []tables.Prompt{{PromptID: "p1"}}, nil)
		}, `task generate (iteration 000001) failed after 1 attempt(s): bad task output: task generate output "trajectories" (iterations/000001/trajectories.parquet): read trajectories file "trajectories.parquet": want table trajectories, found table prompts (read it as prompts)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := openRun(t, standintest.NewStore(t, 0), pipeline.RunOptions{})
			task := pipeline.GenerateTask("generate", "v1", "", func(ctx context.Context, c *pipeline.TaskContext) error {
				return tc.write(c.OutputPath(pipeline.OutTrajectories))
			})
			n := r.Iteration(1).Go(ctx, task, pipeline.Call{})
			err := n.Wait(ctx)
			if tc.err != "" {
				if !errors.Is(err, pipeline.ErrOutput) || err.Error() != tc.err {
					t.Fatalf("got %v, want ErrOutput %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a, err := n.Result(pipeline.OutTrajectories)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(a.Path, "/"+runs.TrajectoriesFile) {
				t.Errorf("trajectories at %s, want a path ending in /%s", a.Path, runs.TrajectoriesFile)
			}
		})
	}
}

func TestCodeDigest(t *testing.T) {
	cases := []struct {
		name, code string
		v          any
		want, err  string
	}{
		{"struct", "rollout-1", struct{ Code, Identity string }{"rollout-1", "tiny"}, "rollout-1-60b4d1ec0f43773f", ""},
		{"NaN", "rollout-1", struct{ T float64 }{math.NaN()}, "", "json: unsupported value: NaN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pipeline.CodeDigest(tc.code, tc.v)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			// The code, a dash and the first 8 bytes of the SHA-256 of
			// {"Code":"rollout-1","Identity":"tiny"}.
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %s", got, err, tc.want)
			}
		})
	}
}
