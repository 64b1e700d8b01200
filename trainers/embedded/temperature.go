package embedded

import (
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
)

// temperature is the temperature a trajectory trains at: its sampler
// column's (policy.Sampling.TrainTemperature), so that logπ is log
// softmax(z/T) of the distribution the sampler drew from and recorded,
// for the ratio, the gradient and the KL reference alike. A row without
// a sampler column reads as temperature 1. A row sampled with top_p below
// 1, or whose sampler column is not JSON, fails the update (ErrBatch).
func temperature(t tables.Trajectory) (float64, error) {
	s, err := policy.RowSampling(t.Sampler)
	if err == nil {
		var temp float64
		if temp, err = s.TrainTemperature(); err == nil {
			return temp, nil
		}
	}
	return 0, fmt.Errorf("%w: sample %d of prompt %q: %w", ErrBatch, t.SampleIndex, t.PromptID, err)
}
