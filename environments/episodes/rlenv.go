package episodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// An RLEnv is an RL environment a program offers its episodes stages,
// which name it with rl_env and configure it with rl_options.
type RLEnv interface {
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

// Func is an RLEnv without options: the Maker itself.
type Func Maker

// Options is nil: the environment takes none.
func (Func) Options() any { return nil }

// Open returns f.
func (f Func) Open(any, string) (Maker, string, error) { return Maker(f), "", nil }

// decodeOptions decodes raw (rl_options) into env's options strictly: an
// unknown key is an error naming the keys there are.
func decodeOptions(env RLEnv, raw map[string]any) (any, error) {
	opts := env.Options()
	if opts == nil {
		if len(raw) > 0 {
			return nil, fmt.Errorf("this environment takes no rl_options")
		}
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(opts); err != nil {
		return nil, fmt.Errorf("%v (keys: %s)", strings.TrimPrefix(err.Error(), "json: "), strings.Join(optionKeys(opts), ", "))
	}
	return opts, nil
}

// optionKeys lists the json keys of the struct opts points to.
func optionKeys(opts any) []string {
	t := reflect.TypeOf(opts)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	if t.Kind() != reflect.Struct {
		return out
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
