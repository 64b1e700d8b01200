package trackers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// TensorBoardOptions are a tensorboard tracking entry's keys.
type TensorBoardOptions struct {
	// Dir is the log directory (`tensorboard --logdir DIR`); each run
	// writes its event files to DIR/<run>, so that runs appear side by
	// side. A relative path is taken from the pipeline file's directory.
	Dir string `yaml:"dir"`
	// Artifacts is refused: TensorBoard's log directory holds event files
	// only, so a tensorboard entry keeps no checkpoints (the key is here
	// to say so, rather than call it unknown).
	Artifacts string `yaml:"artifacts,omitempty"`
}

// Validate says what a tensorboard entry misses.
func (o *TensorBoardOptions) Validate() error {
	if o.Dir == "" {
		return errors.New("dir: missing (the log directory, e.g. dir: tb)")
	}
	if o.Artifacts != "" {
		return fmt.Errorf("artifacts: tensorboard keeps event files only, not artifacts: set artifacts: %s on an mlflow or wandb entry, or export a checkpoint with rlpipe policy export", ArtifactsCheckpoints)
	}
	return nil
}

// Where is the log directory.
func (o *TensorBoardOptions) Where() string { return o.Dir }

// Rebase takes a relative Dir from base, the pipeline file's directory.
func (o *TensorBoardOptions) Rebase(base string) {
	if o.Dir != "" && !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(base, o.Dir)
	}
}

// TensorBoardBackend writes TensorBoard event files: the value cli/kinds
// registers as kind tensorboard.
var TensorBoardBackend Backend = tensorBoardBackend{}

type tensorBoardBackend struct{}

func (tensorBoardBackend) Name() string { return "tensorboard" }

func (tensorBoardBackend) Options() any { return &TensorBoardOptions{} }

func (tensorBoardBackend) Target(dir string) any { return &TensorBoardOptions{Dir: dir} }

func (tensorBoardBackend) Noun() string { return "a tensorboard tracker" }

func (tensorBoardBackend) Open(opts any) (Tracker, error) {
	o, ok := opts.(*TensorBoardOptions)
	if !ok {
		return nil, fmt.Errorf("tensorboard: options are %T, want *TensorBoardOptions", opts)
	}
	return &TensorBoard{dir: o.Dir, now: time.Now}, nil
}

// TensorBoard writes a run's points as TensorBoard event files: every
// scalar as a simple value (float32) at its step, and the commit of each
// step and the run's config as text (TensorBoard's text plugin). Each
// Start of a run opens a new file in DIR/<run>; TensorBoard reads a
// directory's files in name order, and a file's first Log marks a
// restart (SessionLog START) at its first step, so that a step written
// again (a resumed run, a back-fill) replaces the earlier points from that
// step on.
//
// A file's bytes depend only on the points and the config, but for the
// time written in its first event: an event's wall_time is its point's
// commit time.
type TensorBoard struct {
	dir  string
	now  func() time.Time
	f    *os.File
	w    *bufio.Writer
	path string
	// started says the file has its SessionLog START.
	started bool
}

// Start opens a new event file for the run and writes its config as the
// text "config" at step 0. A tracker already started keeps its file.
func (t *TensorBoard) Start(_ context.Context, r Run) error {
	if t.f != nil {
		return nil
	}
	dir := filepath.Join(t.dir, r.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	now := t.now()
	f, path, err := createEventFile(dir, now)
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	t.f, t.w, t.path = f, bufio.NewWriter(f), path
	if err := writeRecord(t.w, versionEvent(now)); err != nil {
		return t.fail(err)
	}
	if len(r.Config) > 0 {
		// Indented, the text plugin's Markdown shows the YAML as code.
		cfg := Point{Step: 0, Time: now, Text: map[string]string{"config": indent(string(r.Config))}}
		if err := writeRecord(t.w, pointEvent(cfg)); err != nil {
			return t.fail(err)
		}
	}
	if err := t.w.Flush(); err != nil {
		return t.fail(err)
	}
	return nil
}

// createEventFile creates a file whose name TensorBoard recognises
// ("events.out.tfevents.<seconds>.rlpipe"), ordered after the directory's
// earlier ones.
func createEventFile(dir string, now time.Time) (*os.File, string, error) {
	base := fmt.Sprintf("events.out.tfevents.%010d.rlpipe", now.Unix())
	for i := 0; ; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, path, err
	}
}

// Log writes one event per point, in order, and flushes them. The first
// Log of a file writes a SessionLog START at its first point's step
// before them: TensorBoard then drops what earlier files hold from that
// step on (what an interrupted attempt or a live run wrote), so that
// each step shows once, with the last values.
func (t *TensorBoard) Log(_ context.Context, points []Point) error {
	if t.f == nil {
		return errors.New("tensorboard: Log before Start")
	}
	if !t.started && len(points) > 0 {
		first := points[0]
		for _, p := range points {
			if p.Step < first.Step {
				first = p
			}
		}
		if err := writeRecord(t.w, startEvent(first.Time, first.Step)); err != nil {
			return t.fail(err)
		}
		t.started = true
	}
	for _, p := range points {
		if err := writeRecord(t.w, pointEvent(p)); err != nil {
			return t.fail(err)
		}
	}
	if err := t.w.Flush(); err != nil {
		return t.fail(err)
	}
	return nil
}

// fail closes a file that could not be written: the next Start opens a
// new one.
func (t *TensorBoard) fail(err error) error {
	_ = t.f.Close()
	t.f, t.w, t.started = nil, nil, false
	return fmt.Errorf("tensorboard: write %s: %w", t.path, err)
}

// Path is the event file being written ("" before Start).
func (t *TensorBoard) Path() string { return t.path }

// End flushes and closes the event file. TensorBoard has no notion of a
// run's status, so the outcome is not recorded: an event file holds
// points only, and a run that finished, failed or was killed looks the
// same in TensorBoard but for its last step.
func (t *TensorBoard) End(_ context.Context, _ Outcome) error {
	if t.f == nil {
		return nil
	}
	err := t.w.Flush()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	t.f, t.w, t.started = nil, nil, false
	if err != nil {
		return fmt.Errorf("tensorboard: close %s: %w", t.path, err)
	}
	return nil
}

func indent(s string) string {
	out := make([]byte, 0, len(s)+len(s)/8)
	start := true
	for i := 0; i < len(s); i++ {
		if start {
			out = append(out, "    "...)
		}
		out = append(out, s[i])
		start = s[i] == '\n'
	}
	return string(out)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
