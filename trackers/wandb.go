package trackers

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/internal/lineproc"
)

//go:embed wandb_worker.py
var wandbWorker string

// WandbOptions are a wandb tracking entry's keys. The API key is never a
// key: wandb reads WANDB_API_KEY from the environment, and rlpipe only
// looks whether it is set, so it reaches neither the store, a log nor
// the run's recorded config.
type WandbOptions struct {
	// Dir is the directory wandb writes under (its dir=): an offline run
	// is DIR/wandb/offline-run-<time>-<id>, which `wandb sync` uploads.
	// A relative path is taken from the pipeline file's directory.
	Dir string `yaml:"dir"`
	// Project is the W&B project (default "rlpipe"); Entity the team or
	// user ("": the key's default entity).
	Project string `yaml:"project,omitempty"`
	Entity  string `yaml:"entity,omitempty"`
	// Python is a venv directory or an interpreter with the wandb package
	// (default: python3 on PATH). A relative path is taken from the
	// pipeline file's directory. The project's .venv-tracking has wandb
	// 0.31 (scripts/tracker-venv.sh makes it).
	Python string `yaml:"python,omitempty"`
	// Artifacts: "checkpoints" logs the adapter (or weights) of every
	// evaluated checkpoint as a W&B artifact of type model; "" none.
	Artifacts string `yaml:"artifacts,omitempty"`
}

// DefaultWandbProject is the project a wandb entry without one uses.
const DefaultWandbProject = "rlpipe"

// Validate says what a wandb entry misses.
func (o *WandbOptions) Validate() error {
	if o.Dir == "" {
		return errors.New("dir: missing (the directory wandb writes its runs under, e.g. dir: wandb)")
	}
	return validateArtifacts(o.Artifacts)
}

// Where is the directory wandb writes under.
func (o *WandbOptions) Where() string { return o.Dir }

// Rebase takes a relative Dir, and a relative Python path, from base,
// the pipeline file's directory.
func (o *WandbOptions) Rebase(base string) {
	if o.Dir != "" && !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(base, o.Dir)
	}
	if o.Python != "" && !filepath.IsAbs(o.Python) {
		o.Python = filepath.Join(base, o.Python)
	}
}

// WandbBackend records runs in Weights & Biases through the wandb
// package: the value cli/kinds registers as kind wandb.
var WandbBackend Backend = wandbBackend{}

type wandbBackend struct{}

func (wandbBackend) Name() string { return "wandb" }

func (wandbBackend) Options() any { return &WandbOptions{} }

func (wandbBackend) Target(dir string) any { return &WandbOptions{Dir: dir} }

func (wandbBackend) Noun() string { return "a wandb tracker" }

func (wandbBackend) Open(opts any) (Tracker, error) {
	o, ok := opts.(*WandbOptions)
	if !ok {
		return nil, fmt.Errorf("wandb: options are %T, want *WandbOptions", opts)
	}
	v := *o
	if v.Project == "" {
		v.Project = DefaultWandbProject
	}
	return &Wandb{o: v, env: os.Getenv}, nil
}

// Errors of the wandb tracker.
var (
	// ErrNoWandb: the interpreter cannot import the wandb package.
	ErrNoWandb = errors.New("no wandb package")
	// ErrWandbWorker: the worker process broke (it exited, or wrote what
	// is not the protocol's).
	ErrWandbWorker = errors.New("wandb worker failed")
)

var _ Checker = (*Wandb)(nil)

// Wandb records a run in Weights & Biases through the real wandb
// package, run by a Python worker it supervises (trackers/wandb_worker.py,
// JSON lines on stdin and stdout): offline by default, a run directory
// `wandb sync` uploads; online when WANDB_API_KEY is in the environment
// (and WANDB_MODE is not offline). One W&B run per rlpipe run, its id the
// run's name (WandbRunID): a resumed run or a back-fill continues it
// (resume="allow"). Scalars keep their rlpipe tags as metric names, each
// point at its step, with its commit's time; eval/* metrics also have the
// step metric "checkpoint" (pass@k per checkpoint as a series of its
// own). The config is the MLflow tracker's parameters (Run.Params, the
// config flattened to dotted keys) with rlpipe.run and
// rlpipe.config_hash; each row holds its commit as rlpipe/commit.
//
// With artifacts: checkpoints, each evaluated checkpoint's files are a
// version of the run's model artifact (KeepCheckpoint).
//
// End finishes the W&B run with exit code 0 (Finished, and Running: W&B
// closes a run with its writer), 1 (Failed, Stopped) or 255 (Killed, as
// wandb itself marks an interrupted run).
type Wandb struct {
	o   WandbOptions
	env func(string) string
	w   *wandbProc
	// runDir is the run directory wandb writes (offline-run-…), runID
	// the W&B run's id.
	runDir, runID string
}

// WandbRunID is the W&B run id of rlpipe run name: the name when it is
// made of letters, digits, '-', '_' and '.' and at most 64 bytes; else
// those characters of it, cut to 48 bytes, and 8 hex digits of its hash.
func WandbRunID(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	id := b.String()
	if id == name && len(id) <= 64 && id != "" {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	return truncate(id, 48) + "-" + hex.EncodeToString(sum[:4])
}

// Mode is how the tracker writes: "online" when WANDB_API_KEY is set and
// WANDB_MODE is not offline, else "offline".
func (w *Wandb) Mode() string {
	if w.env("WANDB_API_KEY") != "" && w.env("WANDB_MODE") != "offline" {
		return "online"
	}
	return "offline"
}

// RunDir is the run directory wandb writes ("" before Start).
func (w *Wandb) RunDir() string { return w.runDir }

// python is the interpreter Python names.
func (w *Wandb) python() (string, error) {
	p := w.o.Python
	if p == "" {
		found, err := exec.LookPath("python3")
		if err != nil {
			return "", fmt.Errorf("wandb: look up python3 on PATH: none found; set python: to a venv with wandb (the project's .venv-tracking, made by scripts/tracker-venv.sh): %w", ErrNoWandb)
		}
		return found, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("wandb: python %s: no such venv or interpreter; set python: to a venv with wandb (the project's .venv-tracking, made by scripts/tracker-venv.sh): %w", p, ErrNoWandb)
	}
	if fi.IsDir() {
		return filepath.Join(p, "bin", "python"), nil
	}
	return p, nil
}

// noWandb is the message of an interpreter that cannot import wandb.
func noWandb(py, why string) error {
	return fmt.Errorf("wandb: python %s cannot import wandb (%s): set python: to a venv with wandb 0.31 (the project's .venv-tracking, made by scripts/tracker-venv.sh), or pip install wandb into it: %w", py, why, ErrNoWandb)
}

// Check is the plan-time check (Checker): the interpreter imports wandb.
// It says once, on log, how the tracker will write: offline, with the
// command that uploads the runs, when no key is in the environment.
func (w *Wandb) Check(ctx context.Context, log zerolog.Logger) error {
	p, err := w.start(ctx)
	if err != nil {
		return err
	}
	p.close()
	if w.Mode() == "offline" {
		log.Info().Str("tracker", "wandb:"+w.o.Dir).Msgf("wandb: no WANDB_API_KEY in the environment (or WANDB_MODE=offline): writing offline runs under %s; upload them with: wandb sync %s",
			filepath.Join(w.o.Dir, "wandb"), filepath.Join(w.o.Dir, "wandb", "offline-run-*"))
	}
	return nil
}

// Start starts the worker and opens the W&B run of r (resume="allow":
// the same id continues it), its config the run's parameters. A tracker
// whose worker runs keeps it.
func (w *Wandb) Start(ctx context.Context, r Run) error {
	if w.w != nil {
		return nil
	}
	p, err := w.start(ctx)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(w.o.Dir)
	if err != nil {
		p.close()
		return fmt.Errorf("wandb: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.close()
		return fmt.Errorf("wandb: %w", err)
	}
	config := map[string]string{}
	for k, v := range r.Params {
		config[k] = v
	}
	config["rlpipe.run"] = r.Name
	if r.ConfigHash != "" {
		config["rlpipe.config_hash"] = r.ConfigHash
	}
	var out struct {
		RunDir string `json:"run_dir"`
	}
	req := map[string]any{"op": "start", "dir": dir, "project": w.o.Project, "entity": w.o.Entity,
		"id": WandbRunID(r.Name), "name": r.Name, "mode": w.Mode(), "config": config}
	if err := p.call(ctx, "open the run "+r.Name, req, &out); err != nil {
		p.close()
		return err
	}
	w.w, w.runDir, w.runID = p, out.RunDir, WandbRunID(r.Name)
	return nil
}

var _ CheckpointKeeper = (*Wandb)(nil)

// KeepsCheckpoints says the entry sets artifacts: checkpoints.
func (w *Wandb) KeepsCheckpoints() bool { return w.o.Artifacts == ArtifactsCheckpoints }

// WandbModelArtifact is the name of the model artifact that holds the
// checkpoints of W&B run id: one artifact per run, a version per
// checkpoint, aliased by the checkpoint's name, as transformers' W&B
// callback names its checkpoints (model-ID).
func WandbModelArtifact(id string) string { return "model-" + id }

// KeepCheckpoint logs c's files as a new version of the run's model
// artifact (WandbModelArtifact), aliased c.Name ("iteration-000002"),
// with the iteration and commit as metadata. wandb copies the files
// into its staging area before the call returns; offline, `wandb sync`
// uploads them with the run. A checkpoint kept again is a version with
// the same files, which W&B deduplicates by digest.
func (w *Wandb) KeepCheckpoint(ctx context.Context, c Checkpoint) error {
	if w.w == nil {
		return errors.New("wandb: KeepCheckpoint before Start")
	}
	req := map[string]any{"op": "artifact", "name": WandbModelArtifact(w.runID), "type": "model", "dir": c.Dir,
		"aliases": []string{c.Name}, "metadata": map[string]any{"iteration": c.Iteration, "checkpoint": c.Name, "commit": c.Commit}}
	if err := w.w.call(ctx, "keep checkpoint "+c.Name, req, nil); err != nil {
		w.w.close()
		w.w = nil
		return err
	}
	return nil
}

// wandbPoint is a point as the worker takes it.
type wandbPoint struct {
	Step    int                `json:"step"`
	Time    float64            `json:"time,omitempty"` // Unix seconds
	Scalars map[string]float64 `json:"scalars"`
	Commit  string             `json:"commit,omitempty"`
}

// Log sends the points, each at its step; the worker skips those below
// the last step it logged (a retried Log).
func (w *Wandb) Log(ctx context.Context, points []Point) error {
	if w.w == nil {
		return errors.New("wandb: Log before Start")
	}
	ps := make([]wandbPoint, 0, len(points))
	for _, p := range points {
		wp := wandbPoint{Step: p.Step, Scalars: p.Scalars, Commit: p.Text[TagCommit]}
		if wp.Scalars == nil {
			wp.Scalars = map[string]float64{}
		}
		if !p.Time.IsZero() {
			wp.Time = float64(p.Time.UnixMicro()) / 1e6
		}
		ps = append(ps, wp)
	}
	if err := w.w.call(ctx, "log", map[string]any{"op": "log", "points": ps}, nil); err != nil {
		w.w.close()
		w.w = nil // the next Start starts a worker again
		return err
	}
	return nil
}

// End finishes the W&B run with the outcome's exit code and stops the
// worker.
func (w *Wandb) End(ctx context.Context, o Outcome) error {
	if w.w == nil {
		return nil
	}
	defer func() { w.w.close(); w.w = nil }()
	code := 0
	switch o.Status {
	case Running, Finished:
	case Failed, Stopped:
		code = 1
	case Killed:
		code = 255
	default:
		return fmt.Errorf("wandb: end run: unknown outcome %v", o.Status)
	}
	return w.w.call(ctx, "finish the run", map[string]any{"op": "finish", "exit_code": code}, nil)
}

// wandbProc is one worker process.
type wandbProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bounded.Tail
}

// start starts a worker and reads its first line: ready, or the
// interpreter cannot import wandb (ErrNoWandb).
func (w *Wandb) start(ctx context.Context) (*wandbProc, error) {
	py, err := w.python()
	if err != nil {
		return nil, err
	}
	// The worker outlives ctx (a call's): End or a failed call stops it.
	cmd := exec.Command(py, "-I", "-u", "-c", wandbWorker)
	cmd.Env = os.Environ()
	cmd.WaitDelay = 5 * time.Second // wandb's service may hold stderr a moment
	p := &wandbProc{cmd: cmd, stderr: &bounded.Tail{Max: 4 << 10}}
	cmd.Stderr = p.stderr
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("wandb: %w", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("wandb: %w", err)
	}
	p.out = bufio.NewReader(outPipe)
	if err := cmd.Start(); err != nil {
		return nil, noWandb(py, err.Error())
	}
	raw, err := p.read(ctx, "start")
	if err != nil {
		p.close()
		return nil, err
	}
	if ok, why := lineproc.Ready(raw); !ok {
		p.close()
		if why != "" {
			return nil, noWandb(py, why)
		}
		return nil, fmt.Errorf("%w: its first line %.200q is not {\"ready\": true}", ErrWandbWorker, raw)
	}
	return p, nil
}

// call sends one request and decodes its reply into out (nil: none
// wanted); what names the request in errors.
func (p *wandbProc) call(ctx context.Context, what string, req, out any) error {
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("wandb: %s: %w", what, err)
	}
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("wandb: %s: %w: write the request: %v%s", what, ErrWandbWorker, err, p.said())
	}
	raw, err := p.read(ctx, what)
	if err != nil {
		return err
	}
	var e struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || (!e.OK && e.Error == "") {
		return fmt.Errorf("wandb: %s: %w: its reply %.200q is not the protocol's", what, ErrWandbWorker, raw)
	}
	if e.Error != "" {
		return fmt.Errorf("wandb: %s: %s", what, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("wandb: %s: read the reply: %w", what, err)
		}
	}
	return nil
}

// read reads one line, giving up (and killing the worker) when ctx ends.
func (p *wandbProc) read(ctx context.Context, what string) ([]byte, error) {
	b, err := lineproc.ReadLine(ctx, p.out, func() { _ = p.cmd.Process.Kill() })
	switch {
	case errors.Is(err, lineproc.ErrGaveUp):
		return nil, fmt.Errorf("wandb: %s: %w", what, ctx.Err())
	case err != nil:
		_ = p.cmd.Wait()
		return nil, fmt.Errorf("wandb: %s: %w: it exited (%v)%s", what, ErrWandbWorker, p.cmd.ProcessState, p.said())
	}
	return b, nil
}

// said is ": stderr: <last line>" when the worker wrote to stderr.
func (p *wandbProc) said() string {
	if s := p.stderr.LastLine(); s != "" {
		return ": stderr: " + s
	}
	return ""
}

// close ends the worker: its stdin closed (it exits at the end of its
// input), then waited for; killed if it does not go within 30s.
func (p *wandbProc) close() {
	_ = p.in.Close()
	if p.cmd.ProcessState != nil {
		return
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
}
