package policytest

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rlpipe/rlpipe/policy"
)

// testAdapterCapability: the backend loads adapters
// (policy.AdapterLoader), which a pipeline needs from its second
// iteration, or says that it does not (Backend.NoAdapters) — and then
// does not implement it.
func testAdapterCapability(f *fixture) {
	if msg := adapterCapability(f.b); msg != "" {
		f.t.Fatal(msg)
	}
}

// adapterCapability is what is wrong with b's adapter capability, or "".
func adapterCapability(b Backend) string {
	_, ok := b.Policy.(policy.AdapterLoader)
	switch {
	case !ok && !b.NoAdapters:
		return fmt.Sprintf("%T does not implement policy.AdapterLoader: a pipeline samples the adapter it trains from iteration 2, and its plan refuses a policy that cannot load it; implement it, or set Backend.NoAdapters for a backend that samples base models only", b.Policy)
	case ok && b.NoAdapters:
		return fmt.Sprintf("%T implements policy.AdapterLoader, but the backend sets NoAdapters: drop NoAdapters", b.Policy)
	}
	return ""
}

// notLoaded checks that sampling from adapter fails with
// policy.ErrAdapterNotLoaded.
func (f *fixture) notLoaded(what, adapter string) {
	f.t.Helper()
	_, err := f.b.Policy.Generate(f.ctx, f.requests(1), policy.Sampling{MaxTokens: f.b.MaxTokens, Adapter: adapter})
	if !errors.Is(err, policy.ErrAdapterNotLoaded) {
		f.t.Fatalf("%s: sampling from adapter %q: %v, want an error wrapping %v", what, adapter, err, policy.ErrAdapterNotLoaded)
	}
}

// testAdapterNotLoaded: sampling from an adapter the policy does not
// hold fails the call with policy.ErrAdapterNotLoaded.
func testAdapterNotLoaded(f *fixture) {
	f.loader()
	f.notLoaded("no adapter loaded", AdapterName)
	f.load()
	f.notLoaded("another adapter loaded", AdapterName+"-other")
}

// testAdapterLoad: a loaded adapter changes what is sampled, under its
// own version, deterministically, and leaves the base model as it was.
func testAdapterLoad(f *fixture) {
	t := f.t
	base := f.greedy("base", "")
	f.load()
	tuned := f.greedy("adapter", AdapterName)
	changed := false
	for i := range base {
		changed = changed || base[i][0].Text != tuned[i][0].Text
	}
	if !changed {
		t.Fatalf("the adapter from %s samples what the base model does on every prompt; Backend.AdapterDir must change a greedy completion", f.b.AdapterDir)
	}
	want := base[0][0].PolicyVersion + "+" + AdapterName
	if f.b.Version != "" && base[0][0].PolicyVersion != f.b.Version {
		t.Fatalf("base: policy version %q, want %q", base[0][0].PolicyVersion, f.b.Version)
	}
	for i := range tuned {
		v := tuned[i][0].PolicyVersion
		if v == "" || v == base[0][0].PolicyVersion || f.b.Version != "" && v != want {
			t.Fatalf("adapter, request %d: policy version %q (the base's %q); want a version of its own (%q when the backend names its version)", i, v, base[0][0].PolicyVersion, want)
		}
	}
	same(f.t, "adapter, again", f.greedy("adapter, again", AdapterName), tuned)
	same(f.t, "base after loading an adapter", f.greedy("base, again", ""), base)
}

// testAdapterUnload: an unloaded adapter is not loaded any more.
func testAdapterUnload(f *fixture) {
	l := f.loader()
	f.load()
	f.greedy("adapter", AdapterName)
	if err := l.UnloadAdapter(f.ctx, AdapterName); err != nil {
		f.t.Fatalf("unload adapter %s: %v", AdapterName, err)
	}
	f.notLoaded("after unloading", AdapterName)
	f.greedy("base after unloading", "")
}

// testAdapterLoadMissingDir: loading a directory that does not exist
// fails, and leaves no adapter of that name.
func testAdapterLoadMissingDir(f *fixture) {
	l := f.loader()
	dir := filepath.Join(f.t.TempDir(), "no-such-adapter")
	if err := l.LoadAdapter(f.ctx, AdapterName, dir); err == nil {
		f.t.Fatalf("load adapter %s from the missing directory %s: no error", AdapterName, dir)
	}
	f.notLoaded("after a failed load", AdapterName)
}
