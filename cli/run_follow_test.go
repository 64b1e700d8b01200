package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/driver"
)

// TestFollowerShowsEachIterationOnce follows a run of three committed
// iterations as a waiting `rlpipe run --executor temporal` does: those
// committed before it started are not shown, each later one is shown
// once with the lines the driving run printed and its progress figures
// (a run.progress event off a terminal, the progress line on one), and
// nothing is shown while this process's own driver runs the loop.
func TestFollowerShowsEachIterationOnce(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	var driven []string
	for _, l := range strings.Split(h.ok("run", "-f", cfg, "--no-report"), "\n") {
		if strings.HasPrefix(l, "iteration ") || strings.HasPrefix(l, "  eval ") {
			driven = append(driven, l)
		}
	}
	if len(driven) < 3 || !strings.HasPrefix(driven[len(driven)-1], "iteration 3:") {
		t.Fatalf("the run printed iteration lines %q, want 3 iterations", driven)
	}
	st := h.openStore()
	c, err := loadConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	third := slices.IndexFunc(driven, func(l string) bool { return strings.HasPrefix(l, "iteration 3:") })
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		terminal bool
		json     bool
		driving  bool
		from     int // the iteration shown last
		out      []string
		progress []int // run.progress events' iterations, or progress lines' on a terminal
	}{
		{name: "committed before it started", from: 3},
		{name: "text", out: driven, progress: []int{1, 2, 3}},
		{name: "from iteration 2", from: 2, out: driven[third:], progress: []int{3}},
		{name: "json output", json: true, progress: []int{1, 2, 3}},
		{name: "terminal", terminal: true, progress: []int{1, 2, 3}},
		{name: "this process drives", driving: true, out: driven, progress: []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr, logs strings.Builder
			d := runDisplay{stderr: &stderr, terminal: tc.terminal, logger: zerolog.New(&logs)}
			f, err := newFollower(ctx, st, c, "standin", d, printer{w: &stdout, json: tc.json})
			if err != nil {
				t.Fatal(err)
			}
			if f.shown != 3 {
				t.Fatalf("a follower started on 3 committed iterations starts at %d", f.shown)
			}
			f.shown = tc.from
			f.meter = newPace(c.Iterations, f.meter.start)
			f.meter.base, f.meter.done = tc.from, tc.from
			if tc.driving {
				// The catch-up before the drive shows what another driver
				// committed; during the drive the follower shows nothing,
				// and the drive's commits count as shown.
				run := f.wrap(func(ctx context.Context, _ artifacts.Store, _ *config.Config, o driver.Options) (driver.Summary, error) {
					before := stdout.Len()
					f.mu.Lock()
					f.shown = 0
					f.mu.Unlock()
					f.catchUp(ctx)
					if stdout.Len() != before {
						t.Errorf("while this process drives the follower printed %q", stdout.String()[before:])
					}
					o.OnCommit(ctx, "runs-standin", 3)
					return driver.Summary{}, nil
				})
				if _, err := run(ctx, st, c, driver.Options{Name: "standin"}); err != nil {
					t.Fatal(err)
				}
			}
			f.catchUp(ctx)
			f.catchUp(ctx) // nothing twice
			var got []string
			if tc.terminal {
				got = nonEmpty(stderr.String())
			} else {
				got = nonEmpty(stdout.String())
			}
			var progress []int
			for _, l := range got {
				if strings.HasPrefix(l, "[") {
					var n int
					if i := strings.Index(l, "] iteration "); i > 0 {
						_, _ = fmt.Sscan(l[i+len("] iteration "):], &n)
					}
					progress = append(progress, n)
				}
			}
			if tc.terminal {
				want := driven
				var lines []string
				for _, l := range got {
					if !strings.HasPrefix(l, "[") {
						lines = append(lines, l)
					}
				}
				if !slices.Equal(lines, want) {
					t.Errorf("on a terminal it printed\n%s\nwant the run's lines\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
				}
				if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "[####################] iteration 3/3  elapsed ") {
					t.Errorf("its last line is not the full progress line: %q", got)
				}
			} else {
				if !slices.Equal(got, tc.out) {
					t.Errorf("it printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.out, "\n"))
				}
				for _, l := range nonEmpty(logs.String()) {
					var ev struct {
						Event      string `json:"event"`
						Run        string `json:"run"`
						Iteration  int    `json:"iteration"`
						Iterations int    `json:"iterations"`
					}
					if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Event != "run.progress" || ev.Run != "standin" || ev.Iterations != 3 {
						t.Errorf("log line %s, want a run.progress event of run standin of 3 iterations", l)
						continue
					}
					progress = append(progress, ev.Iteration)
				}
			}
			if !slices.Equal(progress, tc.progress) {
				t.Errorf("progress of iterations %v, want %v", progress, tc.progress)
			}
		})
	}
}

func nonEmpty(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestFollowerStoreUnreadable: a follower that cannot read the store at
// the start fails the command, naming the run and the branch; one that
// loses the store while the run goes on prints nothing and logs a debug
// line, and the next poll tries again.
func TestFollowerStoreUnreadable(t *testing.T) {
	st := newLocalStore(t)
	var stdout, logs strings.Builder
	d := runDisplay{stderr: &stdout, logger: zerolog.New(&logs)}
	cfg := &config.Config{Iterations: 2}
	f, err := newFollower(context.Background(), st, cfg, "standin", d, printer{w: &stdout})
	if err != nil {
		t.Fatalf("a run with no branch yet: %v", err)
	}
	if f.shown != 0 || f.head != "" {
		t.Fatalf("a follower of a run with no branch starts at iteration %d, head %q", f.shown, f.head)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	f.catchUp(context.Background())
	if stdout.Len() != 0 {
		t.Errorf("a follower that lost the store printed %q", stdout.String())
	}
	if got := logs.String(); !strings.Contains(got, `"level":"debug"`) || !strings.Contains(got, `"message":"could not follow the run"`) ||
		!strings.Contains(got, `"error":"follow run standin: read branch runs-standin: store `) || !strings.Contains(got, `: invalid argument: closed"`) {
		t.Errorf("log %q, want a debug line naming the run and its branch", got)
	}
	_, err = newFollower(context.Background(), st, cfg, "standin", d, printer{w: &stdout})
	if err == nil || !strings.HasPrefix(err.Error(), "follow run standin: read branch runs-standin: store ") || !strings.HasSuffix(err.Error(), ": invalid argument: closed") {
		t.Errorf("newFollower on a closed store: %v, want an error naming the run and its branch", err)
	}
}
