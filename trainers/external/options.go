package external

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
)

// CodeVersion is the version of this package's side of the contract. It
// enters every train task's Version, so bump it when the same script and
// options would be handed different inputs (2: the advantages a call
// without the advantages input computes divide by the sample std, the
// default since issue 36).
const CodeVersion = "external-2"

// ContractVersion is the contract's version, passed to the trainer as
// RLPIPE_TRAINER_CONTRACT. Flags are only ever added within a version;
// a script should ignore flags it does not know.
const ContractVersion = 1

// DefaultKillGrace is how long a cancelled trainer's process group has
// between SIGTERM and SIGKILL: longer than torchrun's own 30 s wait for
// its workers, whose sessions a SIGKILL of torchrun would orphan.
const DefaultKillGrace = 40 * time.Second

// Options configure the external train stage. Command is required; the
// rest may stay zero.
type Options struct {
	// Command is the trainer's argv ("torchrun", "--nproc_per_node", "8",
	// "trainers/python/grpo_train.py"); the contract's flags are
	// appended. Relative paths resolve against Dir.
	Command []string
	// Hyperparameters are written, as a JSON object, to the file named
	// by --hparams. rlpipe itself reads some of them, with the embedded
	// trainer's meaning: no_std (bool, Dr. GRPO's advantage: no std),
	// keep_zero_std (bool, keep groups whose rewards are all equal), and
	// critic (a mapping: PPO's critic is on, see critic.go).
	// They enter the task's Version, so a change retrains.
	Hyperparameters map[string]any
	// Env is added to the trainer's environment (over rlpipe's own).
	// Values are never logged, and the values of secret-looking keys
	// (HF_TOKEN, WANDB_API_KEY, …) are replaced by <redacted> in the
	// trainer's logged output and in errors. Env does not enter the
	// cache key: put what changes training in Hyperparameters.
	Env map[string]string
	// Dir is the command's working directory (default: rlpipe's own, so
	// a relative script path resolves as in the shell that started it).
	Dir string
	// Version enters the task's Version: bump it when the script changes
	// what it trains (the script's bytes do not enter the cache key).
	Version string
	// Timeout bounds each attempt; the engine enforces it (cancelling the
	// call, which stops the trainer's process group). Zero leaves the
	// task environment's timeout.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL when a call is
	// cancelled (default DefaultKillGrace).
	KillGrace time.Duration
	// GAE are PPO's estimator's γ and λ, written into
	// hyperparameters.critic for the trainer when the critic is on (nil:
	// the trainer's defaults). They enter Version only then.
	GAE *GAE
}

// EnsureDefaults fills in the zero fields that have defaults.
func (o *Options) EnsureDefaults() {
	o.KillGrace = cmp.Or(o.KillGrace, DefaultKillGrace)
}

// Validate reports the first option that cannot work.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case len(o.Command) == 0 || o.Command[0] == "":
		return bad("command is empty; give the trainer's argv, e.g. [python3, trainers/python/grpo_train.py]")
	case o.Timeout < 0:
		return bad("timeout %s is negative", o.Timeout)
	case o.KillGrace < 0:
		return bad("kill grace %s is negative", o.KillGrace)
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("environment variable name %q is not valid", k)
		}
	}
	if _, err := json.Marshal(o.Hyperparameters); err != nil {
		return bad("hyperparameters are not a JSON object: %v", err)
	}
	if _, err := o.Advantages(); err != nil {
		return err
	}
	_, err := o.critic()
	return err
}

// Advantages are the options of the advantages the trainer trains on:
// the hyperparameters no_std and keep_zero_std (false when absent or
// null). A value that is not a bool is an ErrOptions.
func (o Options) Advantages() (advantages.TrainOptions, error) {
	var a advantages.TrainOptions
	for key, dst := range map[string]*bool{"no_std": &a.NoStd, "keep_zero_std": &a.KeepZeroStd} {
		v, ok := o.Hyperparameters[key]
		if !ok || v == nil {
			continue
		}
		b, ok := v.(bool)
		if !ok {
			return a, fmt.Errorf("%w: hyperparameters.%s is %v (%T); it must be true or false", ErrOptions, key, v, v)
		}
		*dst = b
	}
	return a, nil
}

// TaskVersion is the train task's Version: CodeVersion and a digest of
// the command, the hyperparameters and Version — not Env, which may hold
// secrets, nor Dir, which changes with where the checkout is and how the
// config path was typed, not with what is trained. It fails on
// hyperparameters JSON cannot hold (a NaN), which Validate rejects.
func (o Options) TaskVersion() (string, error) {
	var gae *GAE // only with the critic, so other runs keep their versions
	if c, _ := o.critic(); c != nil {
		gae = o.GAE
	}
	v, err := pipeline.CodeDigest(CodeVersion, struct {
		Code            string         `json:"code"`
		Command         []string       `json:"command"`
		Hyperparameters map[string]any `json:"hyperparameters"`
		Version         string         `json:"version"`
		GAE             *GAE           `json:"gae,omitempty"`
	}{CodeVersion, o.Command, o.Hyperparameters, o.Version, gae})
	if err != nil {
		return "", fmt.Errorf("train task version: encode the command and hyperparameters: %w", err)
	}
	return v, nil
}

// secretKey reports whether an environment variable's name looks like it
// holds a secret: it contains api_key, apikey, secret, password,
// credential or private_key, or has a word "token" (HF_TOKEN), matched
// case-insensitively.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"api_key", "apikey", "api-key", "secret", "password", "passwd", "credential", "private_key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(k, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if w == "token" || w == "pat" {
			return true
		}
	}
	return false
}
