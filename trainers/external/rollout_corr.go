package external

import (
	"fmt"

	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// rolloutCorrection checks the hyperparameters of verl's rollout
// correction (rollout_is, rollout_rs and their thresholds), which the
// reference script implements as the embedded trainer does: the key of
// the first that cannot work and what is wrong with it, or "".
func rolloutCorrection(hp map[string]any) (key, msg string) {
	var c grpo.RolloutCorrection
	for _, f := range []struct {
		key string
		s   *string
	}{{"rollout_is", &c.IS}, {"rollout_rs", &c.RS}} {
		switch v := hp[f.key].(type) {
		case nil:
		case string:
			*f.s = v
		default:
			return f.key, fmt.Sprintf("%v is not a string (e.g. %s)", v, map[string]string{"rollout_is": "token", "rollout_rs": "token_k1"}[f.key])
		}
	}
	for _, f := range []struct {
		key string
		x   *float64
	}{{"rollout_is_threshold", &c.ISThreshold}, {"rollout_rs_threshold", &c.RSThreshold}, {"rollout_rs_threshold_lower", &c.RSThresholdLower}} {
		switch v := hp[f.key].(type) {
		case nil:
		case float64:
			*f.x = v
		case int:
			*f.x = float64(v)
		case int64:
			*f.x = float64(v)
		case uint64:
			*f.x = float64(v)
		default:
			return f.key, fmt.Sprintf("%v is not a number", v)
		}
	}
	c.EnsureDefaults()
	if e := c.Check(); e != nil {
		return e.Key, e.Msg
	}
	return "", ""
}
