package kindtest_test

import (
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline/config/configtest"
	"github.com/rlpipe/rlpipe/pipeline/config/kindtest"
	"github.com/rlpipe/rlpipe/pipeline/kind"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// The suite needs no more of a registry than the kind under test: the
// stand-in kind, which fills every slot, passes it in a registry of its
// own.
func TestRunOnARegistryOfOneKind(t *testing.T) {
	reg := &kind.Registry{Kinds: []kind.Kind{standin.Kind}}
	kindtest.Run(t, kindtest.Case{Kind: standin.Kind, Registry: reg, Slot: "reward", Keys: "fail_times: 1", BadKey: "fail_time"})
}

// File puts the case's stage in the slot asked for, its other stages in
// theirs, and appends its sections.
func TestFile(t *testing.T) {
	c := kindtest.Case{Kind: standin.Kind, Keys: "sleep: 1s", Others: map[string]string{"generate": "{kind: standin, env: gen}"},
		Sections: "policy: {kind: embedded}"}
	want := strings.NewReplacer(
		"  generate: {kind: standin, env: gen, sleep: 2s, samples_per_prompt: 4}\n", "  generate: {kind: standin, env: gen}\n",
		"  train: {kind: standin, sleep: 1s}\n", "  train: {kind: standin, version: 2, sleep: 1s}\n",
	).Replace(configtest.Base) + "policy: {kind: embedded}\n"
	if got := kindtest.File(c, "train", "version: 2"); got != want {
		t.Errorf("File =\n%s\nwant\n%s", got, want)
	}
}
