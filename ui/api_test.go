package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/ui"
)

func TestRunsAndRun(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, nil)

	var runs struct{ Runs []ui.RunSummary }
	if code := get(t, h, "/api/runs", &runs); code != http.StatusOK {
		t.Fatalf("GET /api/runs: %d", code)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].Run != testRun || runs.Runs[0].Iteration != 4 || runs.Runs[0].Branch != "runs-demo" {
		t.Fatalf("runs = %+v, want run demo at iteration 4", runs.Runs)
	}
	if runs.Runs[0].Lock != nil {
		t.Fatalf("lock = %+v, want none after the run closed", runs.Runs[0].Lock)
	}
	if runs.Runs[0].LastReward == nil {
		t.Errorf("the runs list shows no last reward")
	}
	if hl := runs.Runs[0].Heldout; hl == nil || hl.Set != "heldout" || !hl.HasBase || hl.LastCheckpoint != "iteration-000004" || hl.Best < hl.Last ||
		math.Abs(hl.Gain-100*(hl.Last-hl.Base)) > 1e-9 {
		t.Errorf("the runs list's held-out figure: %+v", hl)
	}
	wantHL := ui.Headline{Set: "heldout", Metric: "exact_pass@1", Base: 0.25, HasBase: true, Last: 0.5, LastCheckpoint: "iteration-000004",
		Best: 0.5, BestCheckpoint: "iteration-000004", Gain: 25}
	if *runs.Runs[0].LastReward != 0.166667 || *runs.Runs[0].Heldout != wantHL {
		t.Errorf("last reward %v, held-out %+v; want 0.166667 and %+v", *runs.Runs[0].LastReward, *runs.Runs[0].Heldout, wantHL)
	}

	var d ui.RunDetail
	if code := get(t, h, "/api/runs/demo", &d); code != http.StatusOK {
		t.Fatalf("GET /api/runs/demo: %d", code)
	}
	if d.State == nil || d.State.Iteration != 4 || d.State.Cursor != 12 || d.ConfigHash != "sha256:test" {
		t.Fatalf("state %+v, config %q; want iteration 4, cursor 12, sha256:test", d.State, d.ConfigHash)
	}
	if len(d.Iterations) != 4 {
		t.Fatalf("%d iterations, want 4", len(d.Iterations))
	}
	wantTasks := map[int]string{
		1: "sample generate reward train eval-generate-start eval-start",
		2: "sample generate reward train eval-generate eval",
		3: "sample generate reward train",
		4: "sample generate reward train eval-generate eval",
	}
	for i, it := range d.Iterations {
		if it.Iteration != i+1 {
			t.Fatalf("iteration %d at position %d", it.Iteration, i)
		}
		var names []string
		sum := 0.0
		for _, task := range it.Tasks {
			names = append(names, task.Name)
			sum += task.Seconds
			if task.Attempts != 1 || task.Seconds <= 0 && !task.Cached {
				t.Errorf("iteration %d task %s: %+v", it.Iteration, task.Name, task)
			}
		}
		if got := strings.Join(names, " "); got != wantTasks[it.Iteration] {
			t.Errorf("iteration %d tasks = %s, want %s", it.Iteration, got, wantTasks[it.Iteration])
		}
		if it.Seconds != sum {
			t.Errorf("iteration %d seconds %v, tasks sum to %v", it.Iteration, it.Seconds, sum)
		}
		// The stand-in trainer writes numbers as strings; they count.
		if it.Train["iteration"] != float64(it.Iteration) || it.Train["samples"] != 6 {
			t.Errorf("iteration %d train metrics = %v", it.Iteration, it.Train)
		}
		if _, ok := it.Train["mean_reward"]; !ok {
			t.Errorf("iteration %d: no mean_reward in %v", it.Iteration, it.Train)
		}
	}
	var got []string
	for _, e := range d.Evals {
		got = append(got, fmt.Sprintf("%d %s %s pass@1=%.4f pass@4=%.4f ci=%v problems=%d n=%d", e.Iteration, e.Checkpoint, e.Set,
			e.Metrics["pass@1"], e.Metrics["pass@4"], e.Intervals["pass@1"], e.Problems, e.N))
	}
	want := []string{
		"0 base heldout pass@1=0.2500 pass@4=0.4500 ci=[0.15 0.35] problems=4 n=4",
		"2 iteration-000002 heldout pass@1=0.3750 pass@4=0.5750 ci=[0.275 0.475] problems=4 n=4",
		"4 iteration-000004 heldout pass@1=0.5000 pass@4=0.7000 ci=[0.4 0.6] problems=4 n=4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("evals:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestIteration(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, nil)
	var d ui.IterationDetail
	if code := get(t, h, "/api/runs/demo/iterations/2", &d); code != http.StatusOK {
		t.Fatalf("GET iteration 2: %d", code)
	}
	if d.Iteration != 2 || d.Commit == "" || d.Parent == "" || d.Metadata["rlpipe.iteration"] != "2" {
		t.Fatalf("iteration = %+v", d)
	}
	prevEnd := map[string]float64{}
	for _, task := range d.Tasks {
		if task.Start == nil || task.End == nil || *task.End < *task.Start || *task.End > d.Wall+1e-9 {
			t.Fatalf("task %s placed at %v–%v in a %vs iteration", task.Name, task.Start, task.End, d.Wall)
		}
		if task.Env == "" || task.Stage == "" {
			t.Errorf("task %s: env %q stage %q", task.Name, task.Env, task.Stage)
		}
		prevEnd[task.Name] = *task.End
	}
	// Without overlap, each stage starts after the one it reads ends.
	for _, task := range d.Tasks {
		dep := map[string]string{"generate": "sample", "reward": "generate", "train": "reward", "eval": "eval-generate"}[task.Name]
		if dep != "" && *task.Start < prevEnd[dep] {
			t.Errorf("task %s starts at %v before %s ends at %v", task.Name, *task.Start, dep, prevEnd[dep])
		}
	}
	// The timeline lists the tasks in the order they started.
	for i := 1; i < len(d.Tasks); i++ {
		if a, z := d.Tasks[i-1], d.Tasks[i]; *a.Start > *z.Start {
			t.Errorf("task %s (start %v) is listed before %s (start %v)", a.Name, *a.Start, z.Name, *z.Start)
		}
	}
	wrote := map[string]ui.Artifact{}
	for _, a := range d.Artifacts {
		wrote[a.Path] = a
	}
	for _, p := range []string{"iterations/000002/trajectories.parquet", "iterations/000002/train_metrics.json",
		"iterations/000002/adapter/adapter_model.json", "evals/000002/heldout/summary.parquet", "events/000002.metrics.json", "run/state.json"} {
		a, ok := wrote[p]
		if !ok || a.Size <= 0 {
			t.Errorf("artifact %s: %+v (present %v); wrote %v", p, a, ok, d.Artifacts)
		}
		if a.Table != strings.HasSuffix(p, ".parquet") {
			t.Errorf("artifact %s: table %v", p, a.Table)
		}
	}
	if _, ok := wrote["iterations/000001/trajectories.parquet"]; ok {
		t.Errorf("iteration 2 lists iteration 1's trajectories as its own")
	}
}

func TestTablePages(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, nil)
	cases := []struct {
		name          string
		offset, limit int
		wantK         []int
	}{
		{"first page", 0, 3, []int{0, 1, 2}},
		{"across row groups", 8, 5, []int{8, 9, 10, 11, 12}},
		{"last group", 20, 10, []int{20, 21, 22, 23, 24}},
		{"past the end", 30, 10, nil},
		{"whole", 0, 0, seq(0, 25)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p ui.TablePage
			path := fmt.Sprintf("/api/table?ref=main&path=data/wide.parquet&offset=%d&limit=%d", tc.offset, tc.limit)
			if code := get(t, h, path, &p); code != http.StatusOK {
				t.Fatalf("%d", code)
			}
			if p.NumRows != 25 || p.Table != "eval_summary v1" || len(p.Columns) != 9 || p.Columns[2].Name != "k" || p.Columns[2].Type != "int32" {
				t.Fatalf("page header = rows %d table %q columns %v", p.NumRows, p.Table, p.Columns)
			}
			var ks []int
			for _, row := range p.Rows {
				ks = append(ks, int(row[2].(float64)))
				want := any(float64(ks[len(ks)-1]) / 100)
				if ks[len(ks)-1] == 7 {
					want = "NaN"
				}
				if row[5] != want {
					t.Errorf("row k=%d value = %v, want %v", ks[len(ks)-1], row[5], want)
				}
			}
			if fmt.Sprint(ks) != fmt.Sprint(tc.wantK) {
				t.Fatalf("k of rows = %v, want %v", ks, tc.wantK)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestErrorsAreJSON(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, nil)
	cases := []struct {
		name, method, path string
		status             int
		want               string // in the message
	}{
		{"unknown run", "GET", "/api/runs/nope", 404, `no run "nope"`},
		{"bad run name", "GET", "/api/runs/a%20b", 400, "is not a run name"},
		{"iteration not a number", "GET", "/api/runs/demo/iterations/x", 400, "use a number from 1"},
		{"missing iteration", "GET", "/api/runs/demo/iterations/9", 404, "has no iteration 9 (its last is 4)"},
		{"table without ref", "GET", "/api/table?path=data/wide.parquet", 400, "missing ref"},
		{"table with a bad ref", "GET", "/api/table?ref=a:b&path=x", 400, "invalid ref"},
		{"table that is not parquet", "GET", "/api/table?ref=runs-demo&path=run/state.json", 400, "not a readable parquet file"},
		{"missing table", "GET", "/api/table?ref=main&path=nope.parquet", 404, "not found"},
		{"bad offset", "GET", "/api/table?ref=main&path=data/wide.parquet&offset=-1", 400, "offset"},
		{"limit too large", "GET", "/api/table?ref=main&path=data/wide.parquet&limit=5000", 400, "at most 1000"},
		{"unknown branch log", "GET", "/api/log?ref=nope", 404, "not found"},
		{"events without run", "GET", "/api/events", 400, "missing run"},
		{"events of an unknown run", "GET", "/api/events?run=nope", 404, `no run "nope"`},
		{"write", "POST", "/api/runs", 405, "read-only"},
		{"unknown route", "GET", "/api/nope", 404, "no API route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, newRequest(tc.method, tc.path))
			var e struct {
				Error  string
				Status int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("%d, body %q is not JSON: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != tc.status || e.Status != tc.status || !strings.Contains(e.Error, tc.want) {
				t.Fatalf("%d %q; want %d and a message with %q", rec.Code, e.Error, tc.status, tc.want)
			}
		})
	}
}

func TestBranchesLogAndFiles(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, nil)
	var b struct {
		Branches []ui.BranchOut
	}
	get(t, h, "/api/branches", &b)
	var names []string
	for _, br := range b.Branches {
		names = append(names, fmt.Sprintf("%s:%v", br.Name, br.Default))
	}
	if got := strings.Join(names, " "); got != "main:true rlpipe-cache:false rlpipe-locks:false runs-demo:false" {
		t.Fatalf("branches = %s", got)
	}

	var page struct {
		Commits []struct {
			ID      string
			Message string
		}
		NextOffset *int `json:"next_offset"`
	}
	get(t, h, "/api/log?ref=runs-demo&limit=1", &page)
	if len(page.Commits) != 1 || page.Commits[0].Message != "iteration 4" || page.NextOffset == nil || *page.NextOffset != 1 {
		t.Fatalf("first page = %+v", page)
	}
	page.NextOffset = nil
	get(t, h, "/api/log?ref=runs-demo&limit=2&offset=1", &page)
	if len(page.Commits) != 2 || page.Commits[0].Message != "iteration 3" || page.NextOffset == nil {
		t.Fatalf("second page = %+v", page)
	}

	var ls struct {
		Entries []struct {
			Path         string
			CommonPrefix bool `json:"common_prefix"`
		}
	}
	get(t, h, "/api/ls?ref=runs-demo&prefix=iterations/000001", &ls)
	var paths []string
	for _, e := range ls.Entries {
		paths = append(paths, e.Path)
	}
	want := "iterations/000001/adapter/ iterations/000001/prompts.parquet iterations/000001/rewards.parquet iterations/000001/train_metrics.json iterations/000001/trajectories.parquet"
	if strings.Join(paths, " ") != want {
		t.Fatalf("ls = %v\nwant %s", paths, want)
	}

	var obj struct {
		Text   string
		Binary bool
		Size   int64 `json:"size_bytes"`
	}
	get(t, h, "/api/object?ref=runs-demo&path=run/state.json", &obj)
	if !strings.Contains(obj.Text, `"iteration": 4`) || obj.Binary || obj.Size != int64(len(obj.Text)) {
		t.Fatalf("state.json = %+v", obj)
	}
}

// TestEventsFollowTheRun opens an event stream, commits a new iteration
// with the engine, and expects a head event naming it.
func TestEventsFollowTheRun(t *testing.T) {
	st := newRunStore(t, 1)
	srv := httptest.NewServer(newHandler(t, st, &ui.Options{PollInterval: 20 * time.Millisecond}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?run=demo", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("%d %s", res.StatusCode, ct)
	}
	events := make(chan ui.HeadEvent)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			if k, ok := strings.CutPrefix(line, "event: "); ok {
				kind = k
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && kind == "head" {
				var ev ui.HeadEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					select {
					case events <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	next := func() ui.HeadEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no event in time")
		}
		return ui.HeadEvent{}
	}
	if ev := next(); ev.Iteration != 1 || ev.Run != testRun || ev.Commit == "" || ev.Live {
		t.Fatalf("first event = %+v, want iteration 1, not live", ev)
	}
	// until finds the event the stream must come to; the ones on the way
	// (the driver taking the run, the commit before it lets go) may be
	// seen or not, depending on the polls.
	until := func(what string, ok func(ui.HeadEvent) bool) ui.HeadEvent {
		t.Helper()
		for {
			ev := next()
			if ok(ev) {
				return ev
			}
			if ev.Iteration > 2 {
				t.Fatalf("waiting for %s: %+v", what, ev)
			}
		}
	}
	extendRun(t, st, 2)
	until("iteration 2, not live", func(ev ui.HeadEvent) bool { return ev.Iteration == 2 && !ev.Live })
	held, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: testRun, ConfigHash: "sha256:test"})
	if err != nil {
		t.Fatal(err)
	}
	until("live while a driver holds the run", func(ev ui.HeadEvent) bool { return ev.Iteration == 2 && ev.Live })
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	until("not live once it lets go", func(ev ui.HeadEvent) bool { return ev.Iteration == 2 && !ev.Live })
	cancel()
}

func TestToken(t *testing.T) {
	st := sharedRunStore(t)
	h := newHandler(t, st, &ui.Options{Token: "s3cret-0123456789"})
	do := func(path string, mod func(*http.Request)) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := newRequest(http.MethodGet, path)
		if mod != nil {
			mod(req)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do("/api/runs", nil); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "?token=") {
		t.Fatalf("no token: %d %s", rec.Code, rec.Body)
	}
	if rec := do("/?token=wrong", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", rec.Code)
	}
	rec := do("/?token=s3cret-0123456789&x=1", nil)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/?x=1" || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("right token: %d, location %q, cookies %v", rec.Code, rec.Header().Get("Location"), cookies)
	}
	if rec := do("/api/runs", func(r *http.Request) { r.AddCookie(cookies[0]) }); rec.Code != http.StatusOK {
		t.Fatalf("with the cookie: %d %s", rec.Code, rec.Body)
	}
	if rec := do("/api/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-0123456789") }); rec.Code != http.StatusOK {
		t.Fatalf("with the header: %d", rec.Code)
	}
	if rec := do("/api/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-012345678") }); rec.Code != http.StatusUnauthorized {
		t.Fatalf("with a wrong header: %d", rec.Code)
	}
	// A token also lifts the loopback Host check: it is the guard now.
	if rec := do("/api/runs", func(r *http.Request) {
		r.Host = "ui.example:8080"
		r.Header.Set("Authorization", "Bearer s3cret-0123456789")
	}); rec.Code != http.StatusOK {
		t.Fatalf("another host with the token: %d", rec.Code)
	}
	if got := fmt.Sprint(ui.Options{Token: "s3cret-0123456789"}); strings.Contains(got, "s3cret-0123456789") {
		t.Fatalf("options print the token: %s", got)
	}
}

// A token must be a secret: not blank, not padded, not short; the error
// names the variable, never the value.
func TestWeakTokensAreRefused(t *testing.T) {
	st := sharedRunStore(t)
	for tok, want := range map[string]string{
		" ":                  ui.TokenEnv + " is blank: set it to a secret of at least 16 characters (e.g. $(openssl rand -hex 16)), or unset it",
		"\t\t":               ui.TokenEnv + " is blank",
		" 0123456789abcdef ": ui.TokenEnv + " starts or ends with white space, which HTTP drops: remove it",
		"hunter2":            ui.TokenEnv + " has 7 characters: use at least 16",
	} {
		_, err := ui.New(st, &ui.Options{Addr: "0.0.0.0:8080", Token: tok})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token %q: %v, want %q", tok, err, want)
			continue
		}
		if strings.TrimSpace(tok) != "" && strings.Contains(err.Error(), strings.TrimSpace(tok)) {
			t.Errorf("token %q: the error shows it: %v", tok, err)
		}
	}
}

func TestLoopbackOnlyWithoutToken(t *testing.T) {
	st := sharedRunStore(t)
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:80", "[::]:80"} {
		if _, err := ui.New(st, &ui.Options{Addr: addr}); !errors.Is(err, ui.ErrNeedToken) || !strings.Contains(err.Error(), ui.TokenEnv) {
			t.Errorf("New(%s) without a token: %v, want ErrNeedToken naming %s", addr, err, ui.TokenEnv)
		}
		if _, err := ui.New(st, &ui.Options{Addr: addr, Token: "0123456789abcdef"}); err != nil {
			t.Errorf("New(%s) with a token: %v", addr, err)
		}
	}
	// DNS rebinding: a page elsewhere that reaches 127.0.0.1 under its own
	// name is refused.
	h := newHandler(t, st, nil)
	for host, want := range map[string]int{"127.0.0.1:8080": 200, "localhost:8080": 200, "[::1]:8080": 200, "evil.example:8080": 403} {
		rec := httptest.NewRecorder()
		req := newRequest(http.MethodGet, "/api/runs")
		req.Host = host
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

// TestServeStopsWithOpenStreams checks that cancelling Serve's context
// ends event streams and returns promptly, not after the shutdown timeout.
func TestServeStopsWithOpenStreams(t *testing.T) {
	st := sharedRunStore(t)
	s := newHandler(t, st, &ui.Options{Addr: "127.0.0.1:0", ShutdownTimeout: 20 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ta := l.Addr().(*net.TCPAddr); !ta.IP.IsLoopback() {
		t.Fatalf("listening on %s", ta)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	res, err := http.Get("http://" + l.Addr().String() + "/api/events?run=demo")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	page, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") || page.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("page: %d %s", page.StatusCode, page.Header)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// A column's header type is one line: a nested type by its shape, the
// fields counted; the full Arrow type stays in Type.
func TestTableColumnShortType(t *testing.T) {
	var p ui.TablePage
	getOK(t, newHandler(t, sharedRunStore(t), nil), "/api/table?ref=runs-demo&path=iterations/000001/trajectories.parquet&limit=1", &p)
	want := map[string]string{"prompt_id": "utf8", "turns": "list<struct, 6 fields>", "token_ids": "list<int32>", "sample_index": "int32"}
	for _, c := range p.Columns {
		if w, ok := want[c.Name]; ok {
			if c.Short != w {
				t.Errorf("column %s: short type %q, want %q (full: %q)", c.Name, c.Short, w, c.Type)
			}
			delete(want, c.Name)
		}
		if strings.Contains(c.Short, "\n") || len(c.Short) > 40 {
			t.Errorf("column %s: short type %q is not one short line", c.Name, c.Short)
		}
	}
	if len(want) > 0 {
		t.Errorf("no columns %v in %v", want, p.Columns)
	}
}

// TestRunEffectiveConfig: the run view's effective config is the recorded
// config with its defaults filled in by Options.EffectiveConfig; none
// without the function; a config the function cannot read is an error
// the page shows, naming the file, not a failed request.
func TestRunEffectiveConfig(t *testing.T) {
	st := newRunStore(t, 4)
	for _, c := range []struct {
		name string
		fn   func([]byte) (map[string]string, error)
		want *ui.EffectiveConfig
	}{
		{"without", nil, nil},
		{"filled", effectiveKeys, nil},
		{"unreadable", func([]byte) (map[string]string, error) {
			return nil, errors.New("stages.train.kind: unknown kind \"grpo2\"")
		},
			&ui.EffectiveConfig{Path: "run/config.yaml", Error: `fill in the defaults of run/config.yaml: stages.train.kind: unknown kind "grpo2"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d ui.RunDetail
			if code := get(t, newHandler(t, st, &ui.Options{EffectiveConfig: c.fn}), "/api/runs/demo", &d); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			switch c.name {
			case "filled":
				if d.Config == nil || d.Config.Path != "run/config.yaml" || d.Config.Error != "" || d.Config.Keys["trainer.lora.rank"] != "8" || d.Config.Keys["trainer.lr"] != "0.001" {
					t.Errorf("config: %+v", d.Config)
				}
			default:
				if fmt.Sprint(d.Config) != fmt.Sprint(c.want) {
					t.Errorf("config: %+v, want %+v", d.Config, c.want)
				}
			}
		})
	}
}
