package advantages

import (
	"errors"

	"github.com/rlpipe/rlpipe/internal/registry"
)

// An Estimator turns one group's scored rewards into their advantages:
// GRPO's group-normalised reward, and (issue 36) RLOO's leave-one-out
// baseline, Dr. GRPO's. Compute does the rest the same for every
// estimator: grouping by prompt, masking unscored and lone samples, the
// group statistics and Stats. An estimator is one file in this package
// (a value with a Name) and one entry in Estimators in cli/kinds; its
// test runs advantages/estimatortest.
type Estimator interface {
	// Name is what the advantages section's estimator key says ("grpo").
	Name() string
	// Group returns the advantage of each reward of a group of two or
	// more scored samples, in their order; mean and std are the group's
	// (the sample std; MeanStd's population std with
	// Options.PopulationStd), o the options with Epsilon defaulted. It
	// must be deterministic and may not keep rewards.
	Group(rewards []float64, mean, std float64, o Options) []float64
}

// A BatchEstimator needs the whole batch, not one group at a time
// (REINFORCE++'s batch whitening). Group still gives each group's
// advantages; Compute then hands Batch those of every sample it gives an
// advantage (scored, not alone), in the input's row order, and keeps what
// Batch returns (one per input, deterministic, keeping nothing). This is
// the interface's one extension for batch-level baselines: Group alone
// cannot see the other groups.
type BatchEstimator interface {
	Estimator
	Batch(adv []float64, o Options) []float64
}

// A GroupMinimum is an estimator that needs groups of at least
// MinGroup samples to give any advantage (RLOO: 2). A run whose generate
// stage samples fewer per prompt is refused when it is planned, at the
// advantages.estimator key, instead of masking every sample.
type GroupMinimum interface {
	Estimator
	MinGroup() int
}

// MinGroup is e's GroupMinimum, 1 for an estimator that declares none.
func MinGroup(e Estimator) int {
	if m, ok := e.(GroupMinimum); ok {
		return m.MinGroup()
	}
	return 1
}

// ErrUnknownEstimator is an estimator name no estimator of the registry
// has.
var ErrUnknownEstimator = errors.New("unknown advantage estimator")

// Estimators are the advantage estimators a program offers.
type Estimators []Estimator

// Names lists the names, sorted; Lookup finds one by name (an unknown
// name is an ErrUnknownEstimator that lists them).
func (es Estimators) Names() []string { return registry.Names(es) }
func (es Estimators) Lookup(name string) (Estimator, error) {
	return registry.Lookup(es, name, ErrUnknownEstimator)
}

// estimator is o's estimator, GRPO when it names none.
func (o Options) estimator() Estimator {
	if o.Estimator == nil {
		return GRPO
	}
	return o.Estimator
}
