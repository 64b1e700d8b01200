package runners

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/rlpipe/rlpipe/internal/yamlcore"
	"github.com/rlpipe/rlpipe/rewards"
)

// problem is one thing wrong with a runner's config: the path of the key
// it is at, below the runner ("limits.wall"; "" for the runner as a
// whole), what is wrong and what to do.
type problem struct {
	at, msg, hint string
	err           error // a cause to keep for errors.Is, or nil
}

// keyProblem is a problem with the value of the key at path.
func keyProblem(path, hint, format string, a ...any) problem {
	return problem{at: path, msg: path + ": " + fmt.Sprintf(format, a...), hint: hint}
}

// runnerError is the spec's errors for problems of runner r (a verifier
// or a judge, kind), each a *rewards.SpecError at the line and column of
// its key in file, else of the runner, joined.
func runnerError(file, kind string, r rewards.Runner, ps ...problem) error {
	errs := make([]error, 0, len(ps))
	for _, p := range ps {
		pos, ok := r.Keys[p.at]
		if !ok {
			pos = r.Pos
		}
		e := &rewards.SpecError{File: file, Line: pos.Line, Column: pos.Column, Msg: fmt.Sprintf("%s %q: %s", kind, r.Name, p.msg), Hint: p.hint}
		if p.err != nil {
			errs = append(errs, &causedError{SpecError: e, cause: p.err})
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// causedError is a SpecError that also matches its cause (a judge's
// missing API key variable).
type causedError struct {
	*rewards.SpecError
	cause error
}

func (e *causedError) Unwrap() []error { return []error{e.SpecError, e.cause} }

// decode decodes a runner's config map strictly into v. Every unknown
// key (with a "did you mean"), every duration that does not parse and
// every integer key given a fraction or an exponent (which the YAML
// library would truncate: 2.5 to 2, 1e3 to 1000) is reported at its line
// and column in file.
func decode(file, kind string, r rewards.Runner, v any) error {
	if ps := check(reflect.TypeOf(v), r.Config, ""); len(ps) > 0 {
		return runnerError(file, kind, r, ps...)
	}
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalWithOptions(b, v, yaml.Strict()); err != nil {
		return runnerError(file, kind, r, problem{msg: yaml.FormatError(err, false, false)})
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

const durationHint = `write a Go duration such as "200ms", "2s" or "5m"`

// check walks config against t (a struct, a map or a list of them) as a
// pipeline file's keys are checked: the problems, in key order.
func check(t reflect.Type, config any, path string) []problem {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var ps []problem
	switch {
	case t == durationType:
		s, ok := config.(string)
		if !ok {
			return []problem{keyProblem(path, durationHint, "%v is not a duration", config)}
		}
		if _, err := time.ParseDuration(s); err != nil {
			return []problem{keyProblem(path, durationHint, "%q is not a duration", s)}
		}
	case t.Kind() == reflect.Struct:
		m, ok := config.(map[string]any)
		if !ok {
			return nil // the YAML library reports a scalar for a mapping
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[k]
			if !ok {
				in := ""
				if path != "" {
					in = " in " + path
				}
				ps = append(ps, problem{at: join(path, k), msg: fmt.Sprintf("unknown key %q%s", k, in),
					hint: yamlcore.Suggest(k, slices.Collect(maps.Keys(fields)))})
				continue
			}
			ps = append(ps, check(ft, m[k], join(path, k))...)
		}
	case t.Kind() == reflect.Map:
		if m, ok := config.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				ps = append(ps, check(t.Elem(), m[k], join(path, k))...)
			}
		}
	case t.Kind() == reflect.Slice:
		if l, ok := config.([]any); ok {
			for i, v := range l {
				ps = append(ps, check(t.Elem(), v, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		switch x := config.(type) {
		case float64:
			return []problem{keyProblem(path, "", "expected an integer, got %v", x)}
		case string:
			if yamlcore.IsFloat(x) {
				return []problem{keyProblem(path, "", "expected an integer, got %s", x)}
			}
		}
	}
	return ps
}

// checkLimits refuses, when the spec is compiled, the limits a sandbox
// would refuse on every row: a negative one, or a size that overflows
// once in bytes.
func checkLimits(c VerifierConfig) []problem {
	l := c.Limits
	var ps []problem
	for _, f := range []struct {
		key   string
		value int64
		shift uint // to bytes
	}{
		{"cpu_time", int64(l.CPUTime), 0}, {"wall", int64(l.Wall), 0}, {"procs", int64(l.Procs), 0},
		{"memory_mb", l.MemoryMB, 20}, {"output_kb", l.OutputKB, 10}, {"file_mb", l.FileMB, 20},
	} {
		path := "limits." + f.key
		switch {
		case f.value < 0:
			shown := fmt.Sprint(f.value)
			if f.key == "cpu_time" || f.key == "wall" {
				shown = time.Duration(f.value).String()
			}
			ps = append(ps, keyProblem(path, "give a positive limit, or leave it out for the sandbox's default", "must not be negative, got %s", shown))
		case f.value > math.MaxInt64>>f.shift:
			ps = append(ps, keyProblem(path, "give a smaller limit, or leave it out for the sandbox's default", "%d is too large (at most %d)", f.value, int64(math.MaxInt64>>f.shift)))
		}
	}
	return ps
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
