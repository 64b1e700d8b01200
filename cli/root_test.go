package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
)

// storeCommand also opens the store and prints through the command's
// output (branch create's options as the example).
func TestStoreCommand(t *testing.T) {
	h := newStore(t)
	g := &rootOptions{store: h.store, env: environ{getenv: func(string) string { return "" }}}
	errBody := errors.New("the body failed")
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr error
	}{
		{name: "prints the default branch", args: []string{"--from", "x"}, want: "x main\n"},
		{name: "returns the body's error", args: []string{"--from", "fail"}, wantErr: errBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := storeCommand(g, &cobra.Command{Use: "probe", SilenceUsage: true, SilenceErrors: true}, func(ctx context.Context, st artifacts.Store, o branchCreateOptions, _ []string, p printer) error {
				if o.from == "fail" {
					return errBody
				}
				repo, err := st.Repository(ctx)
				if err != nil {
					return err
				}
				return p.Printf("%s %s\n", o.from, repo.DefaultBranch)
			})
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			if !errors.Is(err, tc.wantErr) || out.String() != tc.want {
				t.Fatalf("probe %v: printed %q, %v; want %q, %v", tc.args, out.String(), err, tc.want, tc.wantErr)
			}
		})
	}
}

// withOptions hands the body the options its flags were parsed into,
// defaults included, and the arguments (gc's options as the example).
func TestWithOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "defaults", args: []string{"a"}, want: "false 1h0m0s [a]"},
		{name: "flags", args: []string{"--dry-run", "--grace", "10m", "a", "b"}, want: "true 10m0s [a b]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			cmd := withOptions(&cobra.Command{Use: "probe"}, func(_ *cobra.Command, o gcOptions, args []string) error {
				got = fmt.Sprintf("%t %s %v", o.dryRun, o.grace, args)
				return nil
			})
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil || got != tc.want {
				t.Fatalf("probe %v: got %q, %v; want %q", tc.args, got, err, tc.want)
			}
		})
	}
}
