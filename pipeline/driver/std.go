package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// keepStd is cfg, or a copy of it whose advantages section says std:
// population, for a resumed run whose committed iterations divided their
// advantages by the population std and whose file does not say which
// std to use. The sample std became the default in issue 36; a run
// started before keeps the estimator it trained with instead of
// switching mid-run. The advantages table of the run's last committed
// iteration says which std it used (its task version,
// advantages.VersionStd); a run without one (new, or whose train stage
// takes no advantages) and a file that sets advantages.std are left as
// they are. The effective config the run records then says std:
// population, so the choice is visible on the branch.
func keepStd(ctx context.Context, st artifacts.Store, cfg *config.Config, name string, log zerolog.Logger) (*config.Config, error) {
	if a := cfg.Advantages; a != nil && a.Std != "" {
		return cfg, nil
	}
	branch := runs.Branch(name)
	state, err := runs.ReadState(ctx, st, branch)
	if err != nil || state == nil {
		return cfg, err
	}
	path := runs.IterationPath(state.Iteration, runs.AdvantagesFile)
	info, err := st.StatObject(ctx, branch, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("run %s: read which std its advantages used: %w", name, err)
	}
	population, ok := advantages.VersionStd(info.Metadata[artifacts.MetaTaskVersion])
	if !ok || !population {
		return cfg, nil
	}
	c := *cfg
	a := config.Advantages{}
	if cfg.Advantages != nil {
		a = *cfg.Advantages
	}
	a.Std = config.StdPopulation
	c.Advantages = &a
	log.Warn().Str("run", branch).Int("iteration", state.Iteration).
		Msgf("%s:%s divides by the population std (the default before the sample std): the run resumes with it; set advantages.std in %s to sample to switch, or to population to say so",
			branch, path, cfg.File())
	return &c, nil
}
