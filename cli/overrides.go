package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/cli/kinds"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// overrideOptions are the command-line overrides of a command that reads
// a pipeline config with -f: --set key.path=value (repeatable) and
// key.path=value arguments, applied in that order, the later winning
// (config.Parse, docs/CONFIG.md).
type overrideOptions struct {
	set []string
}

func (o *overrideOptions) AddFlags(fs *pflag.FlagSet) {
	// StringArray, not StringSlice: a value may hold commas ([1, 4]).
	fs.StringArrayVar(&o.set, "set", nil, "override a key of the config: --set key.path=value, the value read as YAML (repeatable; key.path=value arguments do the same)")
}

// load reads the config at path with the overrides of --set and args.
func (o *overrideOptions) load(path string, args []string) (*config.Config, error) {
	return config.Load(path, kinds.Registry(), append(append([]string(nil), o.set...), args...)...)
}

// overrideArgs allows key.path=value arguments only.
func overrideArgs(cmd *cobra.Command, args []string) error {
	for _, a := range args {
		if k, _, ok := strings.Cut(a, "="); !ok || k == "" {
			return usagef("%s: unexpected argument %q: an override is key.path=value, e.g. trainer.lr=1e-6", commandName(cmd), a)
		}
	}
	return nil
}
