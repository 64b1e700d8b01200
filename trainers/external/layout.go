package external

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// OptimizerDir is the subdirectory of the adapter output that holds the
// trainer's optimizer state (whatever files it wrote to --optimizer-out).
// PEFT and vLLM read only the adapter's own files and ignore it.
const OptimizerDir = "optimizer"

// Names under the call's work directory, <work>/trainer/.
const (
	HparamsFile     = "hparams.json"
	adapterInDir    = "adapter-in"
	optimizerInDir  = "optimizer-in"
	adapterOutDir   = "adapter-out"
	optimizerOutDir = "optimizer-out"
	metricsOutFile  = "metrics.json"
	criticInDir     = "critic-in"
	criticOutDir    = "critic-out"
	valuesOutFile   = "values.jsonl"
)

// paths are the files and directories one call hands the trainer.
type paths struct {
	Trajectories, Advantages, Prompts, Hparams string
	AdapterOut, OptimizerOut, MetricsOut       string
	// AdapterIn and OptimizerIn are "" when there is none.
	AdapterIn, OptimizerIn string
	// CriticOut and ValuesOut are PPO's, "" without the critic; CriticIn
	// is the policy input's critic/, "" when it has none.
	CriticIn, CriticOut, ValuesOut string
}

func newPaths(dir string) paths {
	return paths{
		Hparams:      filepath.Join(dir, HparamsFile),
		AdapterOut:   filepath.Join(dir, adapterOutDir),
		OptimizerOut: filepath.Join(dir, optimizerOutDir),
		MetricsOut:   filepath.Join(dir, metricsOutFile),
	}
}

// flags are the contract's flags, appended to the command.
func (p paths) flags(iteration int, seed uint64) []string {
	f := []string{
		"--trajectories", p.Trajectories,
		"--advantages", p.Advantages,
		"--prompts", p.Prompts,
		"--hparams", p.Hparams,
		"--adapter-out", p.AdapterOut,
		"--optimizer-out", p.OptimizerOut,
		"--metrics-out", p.MetricsOut,
	}
	if p.AdapterIn != "" {
		f = append(f, "--adapter-in", p.AdapterIn)
	}
	if p.OptimizerIn != "" {
		f = append(f, "--optimizer-in", p.OptimizerIn)
	}
	if p.CriticOut != "" {
		if p.CriticIn != "" {
			f = append(f, "--critic-in", p.CriticIn)
		}
		f = append(f, "--critic-out", p.CriticOut, "--values-out", p.ValuesOut)
	}
	return append(f, "--iteration", strconv.Itoa(iteration), "--seed", strconv.FormatUint(seed, 10))
}

// splitPolicy lays out the policy input — a previous adapter output —
// as two directories: its PEFT files (everything but OptimizerDir and
// grpo.CriticDir) at p.AdapterIn, and its optimizer state at
// p.OptimizerIn, which stays "" when the input has none (the first
// update, an adapter from elsewhere, a trainer that keeps no state); a
// critic/ that holds files goes to p.CriticIn. The input is this attempt's private
// copy, so its entries are moved, not copied.
func (p *paths) splitPolicy(policy, dir string) error {
	entries, err := os.ReadDir(policy)
	if err != nil {
		return fmt.Errorf("read the policy input: %w", err)
	}
	adapterIn := filepath.Join(dir, adapterInDir)
	if err := os.MkdirAll(adapterIn, 0o755); err != nil {
		return err
	}
	// Subdirectories that are state beside the PEFT files: each moves to
	// its own flag's directory when it holds a file.
	state := map[string]struct {
		to   *string
		name string
	}{OptimizerDir: {&p.OptimizerIn, optimizerInDir}, grpo.CriticDir: {&p.CriticIn, criticInDir}}
	for _, e := range entries {
		src := filepath.Join(policy, e.Name())
		if st, ok := state[e.Name()]; ok && e.IsDir() {
			if ok, err := hasFiles(src); err != nil {
				return err
			} else if ok {
				*st.to = filepath.Join(dir, st.name)
				if err := os.Rename(src, *st.to); err != nil {
					return fmt.Errorf("lay out the policy input's %s/: %w", e.Name(), err)
				}
			}
			continue
		}
		if err := os.Rename(src, filepath.Join(adapterIn, e.Name())); err != nil {
			return fmt.Errorf("lay out the policy input: %w", err)
		}
	}
	if err := checkPolicyIn(adapterIn); err != nil {
		return fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	p.AdapterIn = adapterIn
	return nil
}

// checkPolicyIn checks the policy input's checkpoint: full weights (a
// previous lora: none step) against their shards' index, an adapter's
// tensors otherwise.
func checkPolicyIn(dir string) error {
	if k, err := policy.CheckpointKind(dir); err == nil && k == policy.KindWeights {
		return policy.CheckShards(dir)
	}
	_, _, err := safetensors.ReadAdapterDir(dir)
	return err
}

// assemble moves the validated outputs into the adapter output: the
// files of --adapter-out, and those of --optimizer-out under
// OptimizerDir when it holds any.
func (p paths) assemble(out string) error {
	entries, err := os.ReadDir(p.AdapterOut)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(p.AdapterOut, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("assemble the adapter output: %w", err)
		}
	}
	if p.CriticOut != "" {
		if err := os.Rename(p.CriticOut, filepath.Join(out, grpo.CriticDir)); err != nil {
			return fmt.Errorf("assemble the critic: %w", err)
		}
	}
	ok, err := hasFiles(p.OptimizerOut)
	if err != nil || !ok {
		return err
	}
	if err := os.Rename(p.OptimizerOut, filepath.Join(out, OptimizerDir)); err != nil {
		return fmt.Errorf("assemble the optimizer state: %w", err)
	}
	return nil
}

// hasFiles reports whether dir holds a file at any depth.
func hasFiles(dir string) (bool, error) {
	found := errors.New("found")
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return found
		}
		return nil
	})
	if err == found {
		return true, nil
	}
	return false, err
}
