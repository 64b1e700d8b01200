package skyrlgym

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/skyrlgym"
	"github.com/rlpipe/rlpipe/internal/benchstat"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"golang.org/x/sync/errgroup"
)

const (
	// episodes per round, window in flight, rounds per way (alternating
	// which way goes first; medians reported).
	episodes = 1000
	window   = 32
	rounds   = 3
)

// row is episode i: the question, its answer and the scripted reply —
// right for even i, one too many for odd i, and every tenth without the
// "####" format: the client's row(i).
func row(i int) (question, answer, action string) {
	a, b := 100+i%900, 7+i%90
	sum := a + b
	switch {
	case i%10 == 9:
		action = strconv.Itoa(sum)
	case i%2 == 0:
		action = "#### " + strconv.Itoa(sum)
	default:
		action = "#### " + strconv.Itoa(sum+1)
	}
	return fmt.Sprintf("What is %d+%d?", a, b), strconv.Itoa(sum), action
}

// goRound plays the episodes through the skyrl_gym environment, window
// at once, and returns seconds and the total reward.
func goRound(b *testing.B, m environments.Maker) (float64, float64) {
	ctx := context.Background()
	rewards := make([]float64, episodes)
	t := time.Now()
	var g errgroup.Group
	g.SetLimit(window)
	for i := range episodes {
		g.Go(func() error {
			q, a, act := row(i)
			env, err := m(tables.Prompt{PromptID: strconv.Itoa(i), Prompt: q, Answer: a})
			if err != nil {
				return err
			}
			defer env.End()
			if _, err := env.Reset(ctx, strconv.Itoa(i)); err != nil {
				return err
			}
			st, err := env.Step(ctx, act)
			rewards[i] = st.Reward
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, r := range rewards {
		sum += r
	}
	return time.Since(t).Seconds(), sum
}

// pyRun runs the Python client for rounds rounds.
func pyRun(b *testing.B, py string) (seconds []float64, reward, start float64) {
	worker, err := filepath.Abs("../../environments/skyrlgym/worker.py")
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(py, "testdata/client.py", worker, strconv.Itoa(episodes), strconv.Itoa(window), "1").Output()
	if err != nil {
		b.Fatalf("the python client: %v", err)
	}
	var r struct {
		Seconds []float64 `json:"seconds"`
		Reward  float64   `json:"reward"`
		Start   float64   `json:"start"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("the python client said %q: %v", out, err)
	}
	return r.Seconds, r.Reward, r.Start
}

func BenchmarkSkyRLGym(b *testing.B) {
	py := pyvenv.Py.Python(b, "benchmark skyrl-gym's episodes")
	t0 := time.Now()
	m, _, err := skyrlgym.RLEnv.Open(&skyrlgym.Options{EnvClass: "gsm8k", Python: py}, ".")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Since(t0)
	// 500 right (1), 400 wrong (0), 100 unformatted (0).
	const want = 500.0
	for range b.N {
		var goS, pyS []float64
		for r := range rounds {
			goWay := func() {
				s, sum := goRound(b, m)
				if sum != want {
					b.Fatalf("go: total reward %v, want %v", sum, want)
				}
				goS = append(goS, s)
			}
			pyWay := func() {
				s, sum, _ := pyRun(b, py)
				if sum != want {
					b.Fatalf("python: total reward %v, want %v", sum, want)
				}
				pyS = append(pyS, s...)
			}
			ways := []func(){goWay, pyWay}
			if r%2 == 1 {
				ways = []func(){pyWay, goWay}
			}
			for _, w := range ways {
				w()
			}
		}
		g, p := episodes/benchstat.Median(goS), episodes/benchstat.Median(pyS)
		b.ReportMetric(g, "go_episodes/s")
		b.ReportMetric(p, "python_episodes/s")
		b.ReportMetric(g/p, "go/python")
		b.ReportMetric(start.Seconds(), "worker_start_s")
		b.Logf("%d gsm8k episodes, %d in flight: go %.3fs, python %.3fs (medians of %d: %v, %v); worker start %v",
			episodes, window, benchstat.Median(goS), benchstat.Median(pyS), rounds, goS, pyS, start.Round(time.Millisecond))
	}
}
