package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/dirtest"
	"github.com/rlpipe/rlpipe/policy"
)

// loaderPolicy records the adapters it is asked to load and unload.
type loaderPolicy struct {
	shapeErr  bool
	unloadErr error // what UnloadAdapter returns, after recording the call
	calls     []string
}

func (p *loaderPolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	return nil, errors.New("not used")
}

func (p *loaderPolicy) LoadAdapter(ctx context.Context, name, dir string) error {
	if p.shapeErr {
		return fmt.Errorf("tensor layers.0.q_proj.lora_A: %w", policy.ErrAdapterShape)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapter_config.json")); err != nil {
		return err
	}
	p.calls = append(p.calls, "load "+name)
	return nil
}

func (p *loaderPolicy) UnloadAdapter(ctx context.Context, name string) error {
	p.calls = append(p.calls, "unload "+name)
	return p.unloadErr
}

// basePolicy cannot load adapters.
type basePolicy struct{}

func (basePolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	return nil, errors.New("not used")
}

func adapterDir(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAdaptersLoadByDigestAndUnloadOldest(t *testing.T) {
	ctx := context.Background()
	p := &loaderPolicy{}
	a := policy.NewAdapters(p, "test", "", 1)
	one, two := adapterDir(t, `{"r":1}`), adapterDir(t, `{"r":2}`)
	var names []string
	for _, dir := range []string{one, one, two} {
		name, err := a.Load(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	// A name is 12 hex of the SHA-256 of "adapter_config.json\x00<size>\x00<bytes>".
	wantNames := []string{"adapter-3285a77212c0", "adapter-3285a77212c0", "adapter-7b795ad73c77"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("names = %q, want %q", names, wantNames)
	}
	wantCalls := []string{"load adapter-3285a77212c0", "load adapter-7b795ad73c77", "unload adapter-3285a77212c0"}
	if !slices.Equal(p.calls, wantCalls) {
		t.Fatalf("calls = %q, want %q", p.calls, wantCalls)
	}
	// A server that restarted forgot the adapter: Forget makes Load load it again.
	a.Forget(names[2])
	if _, err := a.Load(ctx, two); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 4 || p.calls[3] != "load adapter-7b795ad73c77" {
		t.Fatalf("calls after Forget = %q", p.calls)
	}
}

func TestAdaptersCopyToRoot(t *testing.T) {
	root := t.TempDir()
	a := policy.NewAdapters(&loaderPolicy{}, "test", root, 0)
	name, err := a.Load(context.Background(), adapterDir(t, `{"r":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, name, "adapter_config.json"))
	if err != nil || string(b) != `{"r":1}` {
		t.Fatalf("copy in root = %q, %v", b, err)
	}
}

// A server may read an adapter's files again while it holds it (vLLM
// reloads what its LoRA cache evicted): the copy in root outlives the
// caller's directory, and goes only once the server confirms the unload,
// at eviction or at Close.
func TestAdaptersKeepTheirCopyUntilUnloaded(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := &loaderPolicy{}
	a := policy.NewAdapters(p, "test", root, 1)
	held := func() []string {
		t.Helper()
		return dirtest.Names(t, root)
	}
	load := func(config string) string {
		t.Helper()
		dir := adapterDir(t, config)
		name, err := a.Load(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil { // the task's scratch copy goes with the task
			t.Fatal(err)
		}
		return name
	}
	one := load(`{"r":1}`)
	if got := held(); !slices.Equal(got, []string{one}) {
		t.Fatalf("root holds %q after the first load, want %q", got, one)
	}
	// The server fails to unload one when two evicts it: its copy stays.
	p.unloadErr = errors.New("connection refused")
	two := load(`{"r":2}`)
	if got := held(); !slices.Equal(got, []string{one, two}) {
		t.Fatalf("root holds %q after a failed unload, want %q", got, []string{one, two})
	}
	// Close tries one again and unloads two; the server confirms both.
	p.unloadErr = nil
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := held(); len(got) != 0 {
		t.Fatalf("root holds %q after Close, want nothing", got)
	}
	want := []string{"load " + one, "load " + two, "unload " + one, "unload " + one, "unload " + two}
	if !slices.Equal(p.calls, want) {
		t.Fatalf("calls = %q, want %q", p.calls, want)
	}
	// A server that cannot unload at Close keeps the copy, and Close says so.
	three := load(`{"r":3}`)
	p.unloadErr = errors.New("connection refused")
	if err := a.Close(ctx); err == nil || err.Error() != "unload adapter "+three+": connection refused" {
		t.Fatalf("Close = %v, want the failed unload of %s", err, three)
	}
	if got := held(); !slices.Equal(got, []string{three}) {
		t.Fatalf("root holds %q after a failed Close, want %q", got, three)
	}
}

func TestAdaptersErrorsRetryCannotFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy policy.Policy
		dir    func(t *testing.T) string
		shape  bool
		msg    string
	}{
		{"no loader", basePolicy{}, func(t *testing.T) string { return adapterDir(t, "{}") }, false,
			"the policy input is an adapter, but policy test cannot load adapters"},
		{"unreadable dir", &loaderPolicy{}, func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing") }, false,
			"read checkpoint "},
		{"wrong shape", &loaderPolicy{shapeErr: true}, func(t *testing.T) string { return adapterDir(t, "{}") }, true,
			"load adapter adapter-2fc580a1d2aa: tensor layers.0.q_proj.lora_A: adapter does not match the base model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.NewAdapters(tc.policy, "test", "", 0).Load(context.Background(), tc.dir(t))
			if !errors.Is(err, policy.ErrAdapterInput) || errors.Is(err, policy.ErrAdapterShape) != tc.shape {
				t.Fatalf("err = %v, want ErrAdapterInput (and ErrAdapterShape: %v)", err, tc.shape)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.msg) {
				t.Fatalf("message %q, want it to start with %q", got, tc.msg)
			}
		})
	}
}
