package policy_test

import (
	"errors"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
)

// A row's sampler column decides the temperature a trainer scores it at;
// what it cannot train on is refused naming the value and the next step.
func TestTrainTemperature(t *testing.T) {
	for _, tc := range []struct {
		name, column string
		want         float64
		tempered     string
		err          string
	}{
		{"no column", "", 1, "", ""},
		{"no temperature key", `{"n":8,"max_tokens":5}`, 1, "", ""},
		{"temperature 1", `{"n":8,"temperature":1,"top_p":0,"max_tokens":5}`, 1, "", ""},
		{"tempered", `{"n":8,"temperature":1.2,"top_p":0,"max_tokens":5}`, 1.2, "tempered", ""},
		{"greedy", `{"temperature":0,"max_tokens":5}`, 1, "", ""},
		{"top_p 1 is no truncation", `{"temperature":0.7,"top_p":1}`, 0.7, "tempered", ""},
		{"top_p", `{"temperature":1,"top_p":0.9}`, 0, "",
			"sampler column: top_p 0.9 trains a policy rlpipe cannot score (the nucleus changes with every token); sample the train stage's rollouts without top_p (temperature alone is trained exactly)"},
		{"not json", `temperature=1`, 0, "",
			`sampler column: "temperature=1" is not a JSON object of sampling parameters: invalid character 'e' in literal true (expecting 'r')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := policy.RowSampling(tc.column)
			var temp float64
			if err == nil {
				if got := s.TemperedLogprobs(); got != tc.tempered {
					t.Errorf("TemperedLogprobs = %q; want %q", got, tc.tempered)
				}
				temp, err = s.TrainTemperature()
			}
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, policy.ErrSampler) {
					t.Fatalf("err = %v; want %q wrapping ErrSampler", err, tc.err)
				}
				return
			}
			if err != nil || temp != tc.want {
				t.Fatalf("temperature %g, %v; want %g", temp, err, tc.want)
			}
		})
	}
}
