package harbor_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/environments/harbor"
)

// The version names a task's [verifier] env, whatever order task.toml
// lists it in; a task without one keeps the version it had (the digest
// of its name, instruction, worlds and timeouts alone).
func TestVersionNamesVerifierEnv(t *testing.T) {
	// One copy, its task.toml rewritten: the world's digest names the
	// Dockerfile's path.
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", task("add-numbers"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the task: %v: %s", err, out)
	}
	toml := filepath.Join(dir, "add-numbers", "task.toml")
	orig, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	version := func(t *testing.T, env string) string {
		t.Helper()
		if err := os.WriteFile(toml, append(orig, env...), 0o644); err != nil {
			t.Fatal(err)
		}
		_, v, err := harbor.RLEnv.Open(&harbor.PipelineOptions{Tasks: dir, WorldCache: cacheDir}, "")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// What the version was before [verifier] env counted.
	tk, world, tests := openTask(t, filepath.Join(dir, "add-numbers"))
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %s %s %v %v\n", tk.Name, tk.Instruction, world.Digest, tests.Digest, tk.AgentTimeout(), tk.VerifierTimeout())
	old := "sha256:" + hex.EncodeToString(h.Sum(nil))

	base := version(t, "")
	ab := version(t, "\n[verifier.env]\nA = \"1\"\nB = \"2\"\n")
	ba := version(t, "\n[verifier.env]\nB = \"2\"\nA = \"1\"\n")
	ab3 := version(t, "\n[verifier.env]\nA = \"1\"\nB = \"3\"\n")
	for _, c := range []struct {
		name       string
		got, other string
		same       bool
	}{
		{name: "a task without env keeps its version", got: base, other: old, same: true},
		{name: "env changes the version", got: ab, other: base},
		{name: "the order of the keys does not", got: ba, other: ab, same: true},
		{name: "a value does", got: ab3, other: ab},
	} {
		if (c.got == c.other) != c.same {
			t.Errorf("%s: %s and %s", c.name, c.got, c.other)
		}
	}
}
