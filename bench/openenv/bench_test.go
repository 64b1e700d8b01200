package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/openenv"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
)

const (
	// episodes each client plays a round: reset and two steps each.
	episodes = 400
	// rounds alternate which client goes first; each figure is the
	// median over them.
	rounds = 3
)

func BenchmarkOpenEnvGoVsPython(b *testing.B) {
	py := pyvenv.OpenEnv.Python(b, "serve the example's OpenEnv environment and run the Python client")
	dir, err := filepath.Abs("../../examples/openenv")
	if err != nil {
		b.Fatal(err)
	}
	opts := &openenv.Options{Serve: &openenv.ServeOptions{App: "arith_env.server:app", Python: filepath.Dir(filepath.Dir(py)), Cwd: dir}}
	r, err := openenv.SharedRemote(opts, "")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	t0 := time.Now()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Since(t0)
	mk, _, err := openenv.RLEnv.Open(opts, "")
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, episodes)
	job := struct {
		URL      string   `json:"url"`
		Episodes [][2]any `json:"episodes"`
	}{URL: r.WSURL(ctx)}
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%04d", i)
		job.Episodes = append(job.Episodes, [2]any{ids[i], environments.Seed(ids[i]) >> 33})
	}
	in, _ := json.Marshal(job)

	goRound := func() (float64, int) {
		solved := 0
		t := time.Now()
		for _, id := range ids {
			env, err := mk(tables.Prompt{})
			if err != nil {
				b.Fatal(err)
			}
			obs, err := env.Reset(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			var x, y int
			fmt.Sscanf(obs, "%d+%d=", &x, &y)
			var st environments.Step
			for _, answer := range []string{"-1", fmt.Sprint(x + y)} {
				if st, err = env.Step(ctx, answer); err != nil {
					b.Fatal(err)
				}
			}
			if st.Reward == 1 {
				solved++
			}
			env.End()
		}
		return time.Since(t).Seconds(), solved
	}
	pyRound := func() (float64, int) {
		cmd := exec.Command(py, "testdata/pyclient.py")
		cmd.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("python client: %v\n%s", err, errb.String())
		}
		var res struct {
			Seconds float64 `json:"seconds"`
			Solved  int     `json:"solved"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			b.Fatalf("python client said %q: %v", out.String(), err)
		}
		return res.Seconds, res.Solved
	}

	for b.Loop() {
		var goS, pyS []float64
		for i := range rounds {
			for _, first := range []bool{i%2 == 0, i%2 != 0} {
				if first {
					s, n := goRound()
					goS = append(goS, s)
					if n != episodes {
						b.Fatalf("go: %d of %d episodes solved", n, episodes)
					}
				} else {
					s, n := pyRound()
					pyS = append(pyS, s)
					if n != episodes {
						b.Fatalf("python: %d of %d episodes solved", n, episodes)
					}
				}
			}
		}
		g, p := episodes/benchstat.Median(goS), episodes/benchstat.Median(pyS)
		b.ReportMetric(g, "go_episodes/s")
		b.ReportMetric(p, "python_episodes/s")
		b.ReportMetric(g/p, "go/python")
		b.ReportMetric(start.Seconds(), "server_start_s")
		b.Logf("%d episodes (reset + 2 steps) a round, %d rounds: go %.3fs, python %.3fs (medians: %v, %v); server start %v",
			episodes, rounds, benchstat.Median(goS), benchstat.Median(pyS), round(goS), round(pyS), start.Round(time.Millisecond))
	}
}

func round(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}
