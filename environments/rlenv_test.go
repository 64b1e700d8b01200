package environments_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rlpipe/rlpipe/environments"
)

type typedOptions struct {
	Steps int `json:"steps"`
}

// Typed hands open the options as decoded, nil for none or another type,
// and gives each stage a fresh options struct.
func TestTyped(t *testing.T) {
	var got []string
	env := environments.Typed("counting", func(o *typedOptions, dir string) (environments.Maker, string, error) {
		if o == nil {
			got = append(got, "nil in "+dir)
			return nil, "", errors.New("steps is missing: add rl_options: {steps: N}")
		}
		got = append(got, fmt.Sprintf("steps %d in %s", o.Steps, dir))
		return nil, fmt.Sprint("v", o.Steps), nil
	})
	if env.Name() != "counting" {
		t.Errorf("Name = %q, want counting", env.Name())
	}
	a, b := env.Options(), env.Options()
	if _, ok := a.(*typedOptions); !ok || a == b {
		t.Fatalf("Options = %T %p, %T %p: want two fresh *typedOptions", a, a, b, b)
	}
	a.(*typedOptions).Steps = 3
	for _, c := range []struct {
		name        string
		opts        any
		wantVersion string
		wantErr     string
	}{
		{"decoded", a, "v3", ""},
		{"none", nil, "", "steps is missing: add rl_options: {steps: N}"},
		{"another type", &struct{ Steps int }{4}, "", "steps is missing: add rl_options: {steps: N}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, v, err := env.Open(c.opts, "/pipelines")
			if v != c.wantVersion || fmt.Sprint(err) != fmt.Sprint(errOrNil(c.wantErr)) {
				t.Errorf("Open = %q, %v; want %q, %v", v, err, c.wantVersion, errOrNil(c.wantErr))
			}
		})
	}
	want := "[steps 3 in /pipelines nil in /pipelines nil in /pipelines]"
	if fmt.Sprint(got) != want {
		t.Errorf("open saw %v, want %s", got, want)
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}
