package trackers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// A Tracker receives one run's points: an experiment tracker's client
// (TensorBoard event files, an MLflow server). Its methods are called from
// one goroutine at a time, never from the loop's path (Feed calls them).
type Tracker interface {
	// Start opens the run in the tracker, or finds it again when the run
	// resumes, and records its config. It is called before any Log, and
	// again after a failed Start or Log.
	Start(ctx context.Context, r Run) error
	// Log records points. A Log that fails may have recorded some of
	// them; it is retried with the same points, so recording one twice
	// must do no harm (a tracker keeps a step's last value).
	Log(ctx context.Context, points []Point) error
	// End records how the run ended (Outcome), flushes what Log buffered
	// and releases the tracker. It is called once, last, also when Start
	// failed or was never called: then the tracker has no run to end and
	// only releases what it holds.
	End(ctx context.Context, o Outcome) error
}

// Status is how a run stands when its trackers are ended. The zero value
// is Running: the tracker's run is left open.
type Status int

const (
	// Running: the run goes on, in another process (a back-fill of a run
	// a live process holds). End leaves the tracker's run open; that
	// process ends it.
	Running Status = iota
	// Finished: the run did its last iteration.
	Finished
	// Failed: the run stopped on an error (a task that failed for good,
	// the store).
	Failed
	// Killed: the run was interrupted (Ctrl-C, SIGTERM, a cancelled
	// context).
	Killed
	// Stopped: the run stopped before its last iteration, no process
	// holds it, and the store does not say why (a back-fill). A tracker
	// that recorded how it ended (failed or killed) keeps that; else the
	// run is recorded as failed.
	Stopped
)

var statusNames = [...]string{Running: "running", Finished: "finished", Failed: "failed", Killed: "killed", Stopped: "stopped"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Outcome is what End records: how the run ended, and when.
type Outcome struct {
	Status Status
	// Time is when the run ended: now for a live run, its last commit's
	// time for a back-fill. Zero is the time End is called.
	Time time.Time
}

// EndTime is o.Time, or now when it is zero.
func (o Outcome) EndTime() time.Time {
	if o.Time.IsZero() {
		return time.Now()
	}
	return o.Time
}

// Run is what a tracker knows of the run it records.
type Run struct {
	// Name is the run's name (its branch is runs.Branch(Name)).
	Name string
	// Config is the run's effective config as YAML, every default
	// filled in and secrets redacted (pipeline/driver.TrackerRun: the
	// config the run records at runs.ConfigPath, with the defaults of its
	// kinds' options), and ConfigHash its hash.
	Config     []byte
	ConfigHash string
	// Params is Config flattened to dotted keys ("eval.n": "8",
	// "stages.train.kind": "grpo"), for trackers that show parameters.
	Params map[string]string
}

// Point is what a run recorded at one step: an iteration's figures, or a
// checkpoint's evaluation.
type Point struct {
	// Step is the iteration (0 for the starting policy's evaluation).
	Step int
	// Time is when the step was committed.
	Time time.Time
	// Scalars are the figures by tag ("train/loss", "reward/correct",
	// "eval/heldout/pass@1", "eval/heldout/pass@1/low").
	Scalars map[string]float64
	// Text are strings by tag: TagCommit holds the commit that recorded
	// the step, so that a tracker's point leads back to the store.
	Text map[string]string
	// Checkpoint names the checkpoint a point of evaluations evaluated
	// ("base", "iteration-000002"); "" on an iteration's point.
	Checkpoint string
}

// TagCommit is the text tag of the commit that recorded a point.
const TagCommit = "commit"

// Tags returns p's scalar tags, sorted: the order trackers write them in.
func (p Point) Tags() []string {
	out := make([]string, 0, len(p.Scalars))
	for k := range p.Scalars {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A Backend opens trackers of one kind. The program assembles its
// backends in one registry value (kind.Registry's Trackers, made by
// cli/kinds.Registry), the list Backends.
type Backend interface {
	// Name is the kind a tracking entry names it by ("tensorboard").
	Name() string
	// Options returns the backend's options, zero: a pointer to a struct
	// whose yaml tags are the keys of a tracking entry beside kind. The
	// pipeline config decodes the entry into it strictly.
	Options() any
	// Open makes a tracker from options that Options returned and the
	// config (or Target) filled in. It does no I/O: Start does.
	Open(opts any) (Tracker, error)
	// Target is options whose main key is value: what `rlpipe track
	// --to KIND:VALUE` names (a directory, a server's URI).
	Target(value string) any
}

// Validator is options that check themselves after decoding; the error
// names the key ("uri: ...").
type Validator interface{ Validate() error }

// Spec names a tracker and its options: an entry of a tracking section.
type Spec struct {
	Kind    string
	Options any
}

// String is the spec as `rlpipe track --to` takes it ("tensorboard:tb"),
// when its options say where they point (a Where method), else its kind.
func (s Spec) String() string {
	if w, ok := s.Options.(interface{ Where() string }); ok && w.Where() != "" {
		return s.Kind + ":" + w.Where()
	}
	return s.Kind
}

// Errors of Open and ParseTarget.
var (
	// ErrUnknownKind is a tracker kind no backend registered.
	ErrUnknownKind = errors.New("unknown tracker kind")
)

// Backends are the tracker backends a program offers.
type Backends []Backend

// Kinds lists the backends' names, sorted.
func (bs Backends) Kinds() []string { return registry.Names(bs) }

// Lookup returns the backend named kind.
func (bs Backends) Lookup(kind string) (Backend, bool) { return registry.Find(bs, kind) }

// Open makes the tracker a spec names; an unknown kind is an
// ErrUnknownKind that lists the known ones.
func (bs Backends) Open(s Spec) (Tracker, error) {
	b, ok := bs.Lookup(s.Kind)
	if !ok {
		return nil, fmt.Errorf("%w %q (use %s)", ErrUnknownKind, s.Kind, registry.Or(bs.Kinds()))
	}
	return Open(b, s.Options)
}

// Open makes a tracker of backend b from options its Options or Target
// returned (nil: its defaults), after their Validate.
func Open(b Backend, opts any) (Tracker, error) {
	if opts == nil {
		opts = b.Options()
	}
	if v, ok := opts.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("tracker %s: %w", b.Name(), err)
		}
	}
	return b.Open(opts)
}

// ParseTarget reads KIND:VALUE ("tensorboard:tb",
// "mlflow:http://127.0.0.1:5000") into a spec whose options have the
// backend's main key set to VALUE.
func (bs Backends) ParseTarget(s string) (Spec, error) {
	k, v, ok := strings.Cut(s, ":")
	if !ok || v == "" {
		return Spec{}, fmt.Errorf("tracker %q: write KIND:TARGET, e.g. tensorboard:DIR or mlflow:http://127.0.0.1:5000", s)
	}
	b, known := bs.Lookup(k)
	if !known {
		return Spec{}, fmt.Errorf("tracker %q: %w %q (use %s)", s, ErrUnknownKind, k, registry.Or(bs.Kinds()))
	}
	return Spec{Kind: k, Options: b.Target(v)}, nil
}

// Checker is a tracker that can tell, before the run starts, that it
// cannot work (the wandb package missing from its interpreter): the
// driver calls Check when it makes the plan, so that the run fails then,
// with Check's message, instead of losing every point. Check may say on
// log, once, how the tracker will write (wandb: offline, without a key).
type Checker interface {
	Check(ctx context.Context, log zerolog.Logger) error
}
