package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/config"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
)

// TestTemporalDriverRefuses checks the driver worker's permanent errors,
// which need no Temporal server: they come before the first task.
func TestTemporalDriverRefuses(t *testing.T) {
	ctx := context.Background()
	const file = "../examples/standin/pipeline.yaml"
	cfg, err := loadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := cfg.Hash()
	if err != nil {
		t.Fatal(err)
	}
	in := temporalrun.RunInput{Run: "exp1", Repository: "rl", Config: "/src/pipeline.yaml", ConfigHash: hash, Store: "lakefs://rl"}

	missing := temporalDriver(temporalDriverOptions{load: func(path string, _ []string) (*config.Config, error) {
		return nil, errors.New(path + ": no such file")
	}})
	_, err = missing(ctx, in)
	if err == nil || err.Error() != "driver: /src/pipeline.yaml: no such file (every driver host needs the pipeline at the path the run was started with)" ||
		!errors.Is(err, pipeline.ErrPermanent) {
		t.Errorf("no config: %v", err)
	}

	other := temporalDriver(temporalDriverOptions{load: func(string, []string) (*config.Config, error) {
		c, err := loadConfig(file, nil)
		if err != nil {
			return nil, err
		}
		c.BatchSize++ // another pipeline than the run's
		return c, nil
	}})
	_, err = other(ctx, in)
	if err == nil || !errors.Is(err, pipeline.ErrConfig) || !errors.Is(err, pipeline.ErrPermanent) ||
		!strings.Contains(err.Error(), "/src/pipeline.yaml here has config hash ") ||
		!strings.HasSuffix(err.Error(), "but run exp1 was started with "+hash[:12]+"; run every host from the same checkout") {
		t.Errorf("another config: %v", err)
	}
}
