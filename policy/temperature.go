package policy

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrSampler is a trajectories row whose sampler column a trainer cannot
// use: it is not a JSON object of sampling parameters, or it records a
// sampling (top_p below 1) whose log-probabilities are not those of a
// distribution the trainer can rebuild.
var ErrSampler = errors.New("sampler column")

// RowSampling is the sampling a trajectories row records in its sampler
// column (Sampling.JSON). A row without one ("", as tables written by
// other code may have) or without a temperature key was sampled at
// temperature 1 as far as anyone knows: that is what it reads as.
func RowSampling(column string) (Sampling, error) {
	s := Sampling{Temperature: 1}
	if column == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(column), &s); err != nil {
		return Sampling{}, fmt.Errorf("%w: %q is not a JSON object of sampling parameters: %w", ErrSampler, column, err)
	}
	return s, nil
}

// TrainTemperature is the temperature a trainer scores the row's tokens
// at, the one the sampler's log-probabilities are of (Sample.Logprobs):
// the sampling temperature, and 1 for a greedy sample (temperature 0),
// whose recorded log-probabilities are the model's own, as vLLM's
// processed logprobs are for greedy requests.
//
// It refuses a row sampled with top_p below 1: the sampler drew from the
// nucleus, renormalised, a distribution the trainer cannot rebuild from
// the logits, so neither the recorded log-probabilities (rlpipe's
// untruncated, vLLM's raw or processed) nor the trainer's are those of
// the behaviour policy.
func (s Sampling) TrainTemperature() (float64, error) {
	if s.TopP > 0 && s.TopP < 1 {
		return 0, fmt.Errorf("%w: top_p %g trains a policy rlpipe cannot score (the nucleus changes with every token); sample the train stage's rollouts without top_p (temperature alone is trained exactly)", ErrSampler, s.TopP)
	}
	if s.Temperature == 0 {
		return 1, nil
	}
	return s.Temperature, nil
}

// TemperedLogprobs is what a generate task's version adds for sampling
// whose log-probabilities are of softmax(z/T), T neither 0 nor 1:
// "tempered", and "" otherwise, so that the versions of untempered
// sampling stay what they were before samplers recorded tempered
// log-probabilities, and tempered rows cached before it are not reused.
func (s Sampling) TemperedLogprobs() string {
	if s.Temperature == 0 || s.Temperature == 1 {
		return ""
	}
	return "tempered"
}
