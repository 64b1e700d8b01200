package episodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/environments"
)

// decodeOptions decodes raw (rl_options) into env's options strictly: an
// unknown key is an error naming the keys there are.
func decodeOptions(env environments.RLEnv, raw map[string]any) (any, error) {
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
