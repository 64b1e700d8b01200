package ui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/ui"
)

// TestBrowser drives the page in headless Chromium: the iteration view
// from its hash URL (tasks, timeline, artifacts), the run view (charts
// whose dots carry the API's exact numbers), a live redraw after the
// engine commits another iteration, the table browser, and screenshots.
func TestBrowser(t *testing.T) {
	chromium := findChromium(t)
	st := newRunStore(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := serveUI(ctx, t, st, 100*time.Millisecond)
	api := newHandler(t, st, &ui.Options{EffectiveConfig: effectiveKeys}) // the same answers, read in process
	base := "http://" + addr + "/"

	page := openPage(ctx, t, chromium)

	// The iteration view, straight from its URL.
	page.navigate(ctx, t, base+"#/runs/demo/iterations/3")
	var it struct {
		H1        string
		Tasks     []string
		Bars      int
		Artifacts []string
		Tree      string
	}
	page.waitFor(ctx, t, &it, `(() => {
		const tasks = [...document.querySelectorAll('table.tasks tbody tr')].map((r) => r.dataset.task);
		if (!tasks.length) return null;
		return {h1: document.querySelector('h1').textContent, tasks,
			bars: document.querySelectorAll('svg.gantt rect.task').length,
			artifacts: [...document.querySelectorAll('table.artifacts td:first-child a')].map((a) => a.textContent),
			tree: document.querySelector('dd a.mono').getAttribute('href')};
	})()`)
	if it.H1 != "iteration 3" || strings.Join(it.Tasks, " ") != "sample generate reward train" || it.Bars != 4 {
		t.Fatalf("iteration view: %+v", it)
	}
	// The timeline's bars, top to bottom, in the order the tasks started.
	var starts []float64
	page.eval(ctx, t, `[...document.querySelectorAll('svg.gantt rect.task')].map((r) => +r.getAttribute('x'))`, &starts)
	if !slices.IsSorted(starts) {
		t.Errorf("the timeline's bars start at x %v, not in start order", starts)
	}
	for _, p := range []string{"iterations/000003/trajectories.parquet", "iterations/000003/train_metrics.json", "events/000003.metrics.json"} {
		if !slices.Contains(it.Artifacts, p) {
			t.Errorf("iteration view lists no artifact %s: %v", p, it.Artifacts)
		}
	}
	var d3 ui.IterationDetail
	get(t, api, "/api/runs/demo/iterations/3", &d3)
	if want := "#/tree/" + d3.Commit + "/iterations/000003"; it.Tree != want {
		t.Errorf("iteration view links its commit to %q, want %q", it.Tree, want)
	}
	checkScreenshot(t, page.screenshot(ctx, t), "iteration.png")

	// The run view: each chart dot carries an exact value from the API.
	var d ui.RunDetail
	get(t, api, "/api/runs/demo", &d)
	page.navigate(ctx, t, base+"#/runs/demo")
	const runState = `(() => {
		const chart = (title) => [...document.querySelectorAll('figure.chart')].find((f) => f.querySelector('figcaption').textContent === title);
		const dots = (fig, series) => fig ? [...fig.querySelectorAll('g.series[data-name="' + series + '"] circle.pt')].map((c) => [+c.dataset.x, +c.dataset.y]) : [];
		const rows = document.querySelectorAll('table.iterations tbody tr').length;
		if (!rows) return null;
		return {rows, reward: dots(chart('reward (mean)'), 'mean_reward'), pass1: dots(chart('pass@k on heldout per checkpoint'), 'pass@1'),
			bars: document.querySelectorAll('svg.chart g.bars rect').length, marker: window.testMarker || 0,
			trees: [...document.querySelectorAll('table.iterations tbody td:nth-child(2) a')].map((a) => a.getAttribute('href')),
			config: [...document.querySelectorAll('.head dd a')].map((a) => a.getAttribute('href')).find((h) => h.startsWith('#/object/')) || ''};
	})()`
	type runView struct {
		Rows   int
		Reward [][2]float64
		Pass1  [][2]float64
		Bars   int
		Marker int
		Trees  []string
		Config string
	}
	var rv runView
	page.waitFor(ctx, t, &rv, runState)
	var wantReward [][2]float64
	for _, it := range d.Iterations {
		wantReward = append(wantReward, [2]float64{float64(it.Iteration), it.Train["mean_reward"]})
	}
	wantPass1 := [][2]float64{{0, evalPass1(0)}, {2, evalPass1(2)}, {4, evalPass1(4)}}
	if rv.Rows != 4 || fmt.Sprint(rv.Reward) != fmt.Sprint(wantReward) || fmt.Sprint(rv.Pass1) != fmt.Sprint(wantPass1) || rv.Bars != 4*4+3*2 {
		t.Fatalf("run view: %+v\nwant 4 rows, reward dots %v, pass@1 dots %v, 22 bars (4 stages, and 2 eval tasks in iterations 1, 2 and 4)", rv, wantReward, wantPass1)
	}
	if want := "#/tree/" + d.Iterations[3].Commit + "/iterations/000004"; len(rv.Trees) != 4 || rv.Trees[0] != want {
		t.Errorf("the iterations table links commits to %v, want iteration 4's first: %q", rv.Trees, want)
	}
	if want := "#/object/" + d.Commit + "/run/config.yaml"; rv.Config != want {
		t.Errorf("the config links to %q, want %q", rv.Config, want)
	}
	checkScreenshot(t, page.screenshot(ctx, t), "run.png")

	// The effective pipeline config: the recorded file's keys and the
	// defaults it leaves out (the trainer's LoRA rank and clip ε), as the
	// API gives them.
	if strings.Contains(fixtureConfig, "rank") || strings.Contains(fixtureConfig, "eps_low") {
		t.Fatal("the fixture's config writes the defaults this test looks for")
	}
	var cv struct {
		Summary string
		Note    string
		Rows    map[string]string
	}
	page.waitFor(ctx, t, &cv, `(() => {
		const d = document.querySelector('details.effective-config');
		if (!d) return null;
		d.open = true;
		d.scrollIntoView();
		window.scrollBy(0, -64); // below the sticky header
		return {summary: d.querySelector('summary').textContent,
			note: [...document.querySelectorAll('.head dd')].map((x) => x.textContent).find((x) => x.includes('as written')) || '',
			rows: Object.fromEntries([...d.querySelectorAll('table.config tbody tr')].map((r) => [r.dataset.key, r.cells[1].textContent]))};
	})()`)
	if d.Config == nil || len(d.Config.Keys) == 0 || fmt.Sprint(cv.Rows) != fmt.Sprint(d.Config.Keys) {
		t.Errorf("the config view shows %v\nthe API's effective config is %+v", cv.Rows, d.Config)
	}
	for k, want := range map[string]string{"trainer.lora.rank": "8", "trainer.eps_low": "0.2", "trainer.lr": "0.001", "stages.train.kind": "grpo", "stages.train.env": "train"} {
		if cv.Rows[k] != want {
			t.Errorf("the config view shows %s = %q, want %q", k, cv.Rows[k], want)
		}
	}
	if cv.Summary != "Effective pipeline config (defaults filled in)" || !strings.Contains(cv.Note, "(as written; the effective config, defaults filled in, is below)") {
		t.Errorf("config view: summary %q, head %q", cv.Summary, cv.Note)
	}
	checkScreenshot(t, page.screenshot(ctx, t), "config.png")

	// Live: the engine commits iteration 5; the page redraws without a
	// reload (the marker set on window survives).
	page.eval(ctx, t, "window.testMarker = 7", nil)
	extendRun(t, st, 5)
	page.waitFor(ctx, t, &rv, `(() => { const s = `+runState+`; return s && s.rows === 5 ? s : null; })()`)
	if len(rv.Reward) != 5 || rv.Marker != 7 {
		t.Fatalf("after iteration 5 committed: %+v, want 5 reward dots on the same page", rv)
	}
	// The badge says live only while a driver holds the run: the loop
	// above has let go of it, a driver that opens it takes it.
	badge := func(want string) {
		t.Helper()
		var got string
		page.waitFor(ctx, t, &got, `(() => { const t = document.getElementById('live').textContent; return t === `+strconv.Quote(want)+` ? t : null; })()`)
	}
	badge("idle · iteration 5")
	held, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: testRun, ConfigHash: "sha256:test"})
	if err != nil {
		t.Fatal(err)
	}
	badge("live · iteration 5")
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	badge("idle · iteration 5")

	// The table browser, from the iteration's artifact link.
	page.navigate(ctx, t, base+"#/table/runs-demo/iterations/000003/trajectories.parquet")
	var tb struct {
		Title   string
		Columns []string
		Types   []string
		Rows    int
		Height  float64
	}
	page.waitFor(ctx, t, &tb, `(() => {
		const rows = document.querySelectorAll('table.rows tbody tr').length;
		if (!rows) return null;
		const ths = [...document.querySelectorAll('table.rows thead th')];
		return {title: document.querySelector('h1').textContent, rows,
			columns: ths.map((th) => th.firstChild.textContent),
			types: ths.map((th) => th.querySelector('small') ? th.querySelector('small').textContent : ''),
			height: document.querySelector('table.rows thead').getBoundingClientRect().height};
	})()`)
	if tb.Title != "runs-demo:iterations/000003/trajectories.parquet" || tb.Rows != 6 || !slices.Contains(tb.Columns, "completion") {
		t.Fatalf("table browser: %+v, want 6 trajectories with a completion column", tb)
	}
	// The turns column's header is one line, not its Arrow type over ten.
	if i := slices.Index(tb.Columns, "turns"); i < 0 || tb.Types[i] != "list<struct, 6 fields>" || tb.Height > 60 {
		t.Errorf("table browser header: columns %q, types %q, %.0f px tall; want turns typed list<struct, 6 fields> in a header of two lines", tb.Columns, tb.Types, tb.Height)
	}
	checkScreenshot(t, page.screenshot(ctx, t), "table.png")

	// An error from the API shows as a message, not a blank page.
	page.navigate(ctx, t, base+"#/runs/nope")
	var msg string
	page.waitFor(ctx, t, &msg, `(() => { const e = document.querySelector('.error'); return e ? e.textContent : null; })()`)
	if !strings.Contains(msg, `no run "nope"`) {
		t.Fatalf("error shown = %q", msg)
	}
}

// checkScreenshot checks that b is a PNG of the window's size with more
// than a blank page's colours, and keeps it in screenshotDir.
func checkScreenshot(t *testing.T, b []byte, name string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if r := img.Bounds(); r.Dx() != 1200 || r.Dy() != 900 {
		t.Fatalf("screenshot %s is %v, want 1200×900", name, r)
	}
	if n := colours(img); n < 32 {
		t.Fatalf("screenshot %s has %d colours: an empty page?", name, n)
	}
	path := filepath.Join(screenshotDir(t), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(b))
}

func colours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			c0, c1, c2, c3 := img.At(x, y).RGBA()
			seen[[4]uint32{c0, c1, c2, c3}] = true
		}
	}
	return len(seen)
}

// serveUI serves the UI over st on a free loopback port until the test
// ends, and returns its address (host:port).
func serveUI(ctx context.Context, t *testing.T, st artifacts.Store, poll time.Duration) string {
	t.Helper()
	srv, err := ui.New(st, &ui.Options{Addr: "127.0.0.1:0", PollInterval: poll, EffectiveConfig: effectiveKeys})
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, l) }()
	t.Cleanup(func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// findChromium returns a headless browser: RLPIPE_CHROMIUM, else one on
// the PATH. `make deps` installs Debian's chromium (so does
// scripts/browser-deps.sh alone); a test never installs it, and is
// skipped, saying so, without one.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RLPIPE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on the PATH: run make deps (scripts/deps.sh installs it) or set RLPIPE_CHROMIUM")
	return ""
}

// browser is headless Chromium spoken to over the DevTools protocol on a
// pipe (--remote-debugging-pipe: JSON messages ending in NUL, written to
// the browser's fd 3 and read from its fd 4).
type browser struct {
	cmd    *exec.Cmd
	w      *os.File
	stderr *limitedWriter

	mu      sync.Mutex
	next    int
	pending map[int]chan cdpReply
	readErr error
	done    chan struct{}
}

type cdpReply struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// openPage starts the browser at path with a blank page, closed when the
// test ends.
func openPage(ctx context.Context, t *testing.T, path string) *page {
	t.Helper()
	b := startBrowser(t, path)
	t.Cleanup(b.close)
	return b.newPage(ctx, t)
}

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	toBrowser, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r, fromBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{w: w, stderr: &limitedWriter{w: &bytes.Buffer{}, n: 64 << 10}, pending: map[int]chan cdpReply{}, done: make(chan struct{})}
	b.cmd = exec.Command(path, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--remote-debugging-pipe", "--user-data-dir="+t.TempDir(), "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio", "--hide-scrollbars",
		"--window-size=1200,900", "about:blank")
	b.cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser} // fd 3, fd 4
	b.cmd.Stderr = b.stderr
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers die with it
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	toBrowser.Close()
	fromBrowser.Close()
	go b.read(r)
	return b
}

func (b *browser) read(r *os.File) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var rep cdpReply
		if json.Unmarshal(msg[:len(msg)-1], &rep) != nil || rep.ID == 0 {
			continue // an event; this test only waits on replies
		}
		b.mu.Lock()
		ch := b.pending[rep.ID]
		delete(b.pending, rep.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

// call sends a command (to a page when session is set) and decodes its
// result into out.
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return fmt.Errorf("%s: the browser is gone (%v): %s", method, b.readErr, b.stderr)
	}
	b.next++
	id := b.next
	ch := make(chan cdpReply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, _ := json.Marshal(msg)
	if _, err := b.w.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: the browser closed the pipe: %s", method, b.stderr)
		}
		if rep.Error != nil {
			return fmt.Errorf("%s: %s", method, rep.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(rep.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// close asks the browser to quit, then kills its process group if it
// lingers.
func (b *browser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	b.w.Close()
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	<-b.done
}

// page is one tab.
type page struct {
	b       *browser
	session string
}

func (b *browser) newPage(ctx context.Context, t *testing.T) *page {
	t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		t.Fatal(err)
	}
	p := &page{b: b, session: att.SessionID}
	p.viewport(ctx, t, 1200, 900)
	return p
}

// viewport sets the window's size in CSS pixels (at a device scale of 1).
func (p *page) viewport(ctx context.Context, t *testing.T, width, height int) {
	t.Helper()
	if err := p.b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
}

func (p *page) navigate(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &res); err != nil || res.ErrorText != "" {
		t.Fatalf("navigate %s: %v %s", url, err, res.ErrorText)
	}
}

// eval evaluates a JavaScript expression and decodes its value into out.
func (p *page) eval(ctx context.Context, t *testing.T, expr string, out any) {
	t.Helper()
	if err := p.evalErr(ctx, expr, out); err != nil {
		t.Fatal(err)
	}
}

func (p *page) evalErr(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res); err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluate %.80q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// waitFor evaluates expr until it gives something other than null, and
// decodes that into out. It fails after 20 seconds, showing the page.
func (p *page) waitFor(ctx context.Context, t *testing.T, out any, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		var raw json.RawMessage
		err := p.evalErr(ctx, expr, &raw)
		if err == nil && len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Cannot find context") {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			var text string
			_ = p.evalErr(context.Background(), "document.body ? document.body.innerText.slice(0, 2000) : ''", &text)
			t.Fatalf("waited 20s for %.120q; the page shows:\n%s", expr, text)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *page) screenshot(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	var res struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// limitedWriter keeps the first n bytes written (the browser's stderr,
// for messages) and drops the rest.
type limitedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
