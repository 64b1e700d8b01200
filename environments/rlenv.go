package environments

import (
	"errors"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// An RLEnv is an RL environment a program offers its episodes stages
// (environments/episodes), which name it with rl_env and configure it
// with rl_options. The program lists its RLEnvs in its one registry value
// (kind.Registry's Environments, assembled by cli/kinds.Registry). A new
// one is one file with its value and one entry there; its test runs
// environments/envtest.
type RLEnv interface {
	// Name is what rl_env says ("guess").
	Name() string
	// Options returns a pointer to a fresh options struct, its json tags
	// the keys rl_options may hold; nil when the environment takes none.
	Options() any
	// Open makes the stage's Maker from the decoded options (Options'
	// value, filled in) and the pipeline file's directory, from which
	// relative paths are taken. Its version names what the options make
	// (a world's digest, say): it enters the task's cache key, so a
	// changed world is new work.
	Open(opts any, dir string) (m Maker, version string, err error)
}

// Func is an RLEnv named name without options: the Maker itself.
func Func(name string, m Maker) RLEnv { return funcEnv{name, m} }

type funcEnv struct {
	name string
	make Maker
}

func (f funcEnv) Name() string                            { return f.name }
func (funcEnv) Options() any                              { return nil }
func (f funcEnv) Open(any, string) (Maker, string, error) { return f.make, "", nil }

// Typed is an RLEnv named name whose rl_options are an O: Options is a
// fresh *O, and open gets the decoded *O (nil when Open is given nil or
// another type) and the pipeline file's directory. Every environment with
// options is one: its package declares `var RLEnv = environments.Typed(…)`
// and keeps only its open.
func Typed[O any](name string, open func(o *O, dir string) (Maker, string, error)) RLEnv {
	return typedEnv[O]{name, open}
}

type typedEnv[O any] struct {
	name string
	open func(*O, string) (Maker, string, error)
}

func (e typedEnv[O]) Name() string { return e.name }
func (typedEnv[O]) Options() any   { return new(O) }

func (e typedEnv[O]) Open(opts any, dir string) (Maker, string, error) {
	o, _ := opts.(*O)
	return e.open(o, dir)
}

// ErrUnknownRLEnv is an rl_env name no environment of the registry has.
var ErrUnknownRLEnv = errors.New("unknown RL environment")

// RLEnvs are the RL environments a program offers.
type RLEnvs []RLEnv

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownRLEnv that lists them).
func (es RLEnvs) Names() []string { return registry.Names(es) }
func (es RLEnvs) Lookup(name string) (RLEnv, error) {
	return registry.Lookup(es, name, ErrUnknownRLEnv)
}
