package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/policy"
)

// vLLM's development endpoints (VLLM_SERVER_DEV_MODE=1), which reload
// the served model's weights in place.
const (
	pathRPC         = "/collective_rpc"
	pathResetPrefix = "/reset_prefix_cache"
)

// ErrWeightsRefused is the error of a LoadWeights that a server refused:
// it has no reload endpoint (vLLM without VLLM_SERVER_DEV_MODE=1), it
// cannot see or read the directory, or the weights do not fit its model.
// Loading them again cannot succeed, so it also matches
// policy.ErrAdapterInput.
var ErrWeightsRefused = fmt.Errorf("%w: a server refused to reload weights", policy.ErrAdapterInput)

// ErrBaseReplaced is Generate's error for a request that needs the base
// model's weights (no Sampling.Adapter, or a LoRA adapter over them)
// after LoadWeights replaced them on the servers.
var ErrBaseReplaced = errors.New("the servers' base weights were replaced")

// liveUnknown is weights.live after a reload that failed on some
// endpoint: what the servers hold is unknown until the next reload.
const liveUnknown = "\x00unknown"

// weights is the one full-weights version the servers hold, and the
// Generate calls sampling from it: a server holds one set of weights at a
// time, so a call that needs another version waits until the calls on
// the live one have drained, then reloads (calls that arrive meanwhile
// for the live version wait behind it, so a reload is not starved).
type weights struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at every change
	live     string        // "" the model the servers started with, a weights name, or liveUnknown
	inUse    int           // Generate calls sampling live
	want     string        // the version a waiting call will reload, when waiting
	waiting  bool          // a call waits for the live calls to drain to reload want
	waiters  int           // calls blocked in acquireWeights, for tests
	swapping bool          // a reload is under way
	// base are the directories each endpoint started from (GET
	// /v1/models' root of the base model), read before the first reload
	// so that the base model can be reloaded; nil when unknown.
	base []string
	// dirs are the weights loaded through the client: name → the
	// directory the servers read, "" once unloaded (so a request for
	// them still names weights, and fails as not loaded).
	dirs map[string]string
}

// notify wakes every waiter; w.mu is held.
func (w *weights) notify() {
	if w.changed != nil {
		close(w.changed)
	}
	w.changed = make(chan struct{})
}

// LoadWeights makes the Hugging Face model directory dir the weights
// every endpoint serves, as name: Sampling.Adapter = name then samples
// them (the request names the served base model). It waits for the
// Generate calls on the weights the servers hold to finish, then tells
// each server to reload in place from dir — vLLM's POST /collective_rpc
// {"method": "reload_weights", "kwargs": {"weights_path": dir}}, then
// POST /reset_prefix_cache, so that no cached prefix of the old weights
// is reused —, which needs vLLM started with VLLM_SERVER_DEV_MODE=1. The
// servers read dir themselves: it must be a path each can read (the
// policy's adapter_root, a shared mount).
//
// A server holds one set of weights: a later Generate for another loaded
// name reloads that one, once the calls on the current one have drained.
// A refusal (no such endpoint, a directory the server cannot read,
// weights that do not fit its model) matches ErrWeightsRefused and names
// the server's message; after a failure on some endpoint what the servers
// hold is unknown, and the next call for any weights reloads.
func (c *Client) LoadWeights(ctx context.Context, name, dir string) error {
	if name == "" || dir == "" {
		return fmt.Errorf("openai: load weights %q from %q: name and directory must not be empty", name, dir)
	}
	w := &c.weights
	w.mu.Lock()
	if w.dirs == nil {
		w.dirs = map[string]string{}
	}
	prev, had := w.dirs[name]
	w.dirs[name] = dir
	w.mu.Unlock()
	release, err := c.acquireWeights(ctx, name)
	if err != nil {
		w.mu.Lock()
		if had {
			w.dirs[name] = prev
		} else {
			delete(w.dirs, name)
		}
		w.mu.Unlock()
		return err
	}
	release()
	c.log.Info().Str(logWeights, name).Int("endpoints", len(c.eps)).Msg("weights loaded")
	return nil
}

// UnloadWeights forgets name: a later Generate for it fails with
// policy.ErrAdapterNotLoaded. The servers keep serving what they hold (a
// server always holds some weights), so nothing is sent.
func (c *Client) UnloadWeights(_ context.Context, name string) error {
	w := &c.weights
	w.mu.Lock()
	defer w.mu.Unlock()
	if (w.swapping || w.waiting) && w.want == name {
		// The servers are about to read, or are reading, its directory:
		// the caller keeps the copy and unloads it later.
		return fmt.Errorf("openai: unload weights %s: %w", name, ErrWeightsLoading)
	}
	if _, ok := w.dirs[name]; ok {
		w.dirs[name] = ""
	}
	return nil
}

// ErrWeightsLoading is UnloadWeights' error for weights a reload is about
// to read or reading: policy.Adapters then keeps their copy under
// adapter_root and unloads them again when it closes.
var ErrWeightsLoading = errors.New("a reload is reading them")

// Weights lists the weights loaded through this client and not unloaded,
// and the one the servers hold now ("" for the model they started with).
func (c *Client) Weights() (loaded []string, live string) {
	w := &c.weights
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, dir := range w.dirs {
		if dir != "" {
			loaded = append(loaded, n)
		}
	}
	slices.Sort(loaded)
	return loaded, w.live
}

// isWeights reports whether name is loaded weights, not an adapter.
func (c *Client) isWeights(name string) bool {
	w := &c.weights
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.dirs[name]
	return ok || (name != "" && name == w.live)
}

// acquireWeights waits until the servers hold the weights version
// ("" for the model they started with: sampling it, or an adapter over
// it), reloading them when it is loaded but not live, and returns the
// function that ends the call's use of them.
func (c *Client) acquireWeights(ctx context.Context, version string) (func(), error) {
	w := &c.weights
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		switch {
		case w.swapping || (w.waiting && w.want != version):
			// A reload is under way or waiting for the calls on the live
			// version to drain.
		case w.live == version:
			w.inUse++
			return sync.OnceFunc(func() {
				w.mu.Lock()
				w.inUse--
				w.notify()
				w.mu.Unlock()
			}), nil
		case version == "" && w.base == nil:
			return nil, fmt.Errorf("openai: sample the base model %q (or an adapter on it): %w: the servers hold %s, loaded by LoadWeights; restart them to sample the base model, or sample the weights",
				c.opts.Model, ErrBaseReplaced, liveName(w.live))
		default:
			dirs := w.base
			if version != "" {
				dir := w.dirs[version]
				if dir == "" {
					return nil, fmt.Errorf("%w: weights %s: load them with LoadWeights first", policy.ErrAdapterNotLoaded, version)
				}
				dirs = slices.Repeat([]string{dir}, len(c.eps))
			}
			w.want, w.waiting = version, true
			if w.inUse == 0 {
				w.swapping = true
				first := w.live == "" && w.base == nil
				w.mu.Unlock()
				var base []string
				if first {
					base = c.baseDirs(ctx)
				}
				err := c.reloadWeights(ctx, liveName(version), dirs)
				w.mu.Lock()
				if first {
					w.base = base
				}
				w.swapping, w.want, w.waiting = false, "", false
				w.live = version
				if err != nil {
					w.live = liveUnknown
				}
				w.notify()
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		if w.changed == nil {
			w.notify()
		}
		ch := w.changed
		w.waiters++
		w.mu.Unlock()
		select {
		case <-ch:
			w.mu.Lock()
			w.waiters--
		case <-ctx.Done():
			w.mu.Lock()
			w.waiters--
			if w.waiting && w.want == version && !w.swapping {
				w.want, w.waiting = "", false // another waiter takes it up
				w.notify()
			}
			return nil, fmt.Errorf("openai: wait to sample weights %s: %w", liveName(version), context.Cause(ctx))
		}
	}
}

// liveName shows a weights version in messages.
func liveName(v string) string {
	switch v {
	case "":
		return "the model they started with"
	case liveUnknown:
		return "weights unknown after a failed reload"
	}
	return v
}

// baseDirs reads the directory each endpoint serves its base model from,
// the root GET /v1/models gives it (vLLM keeps it whatever weights it
// reloads), so that the base model can be reloaded after other weights;
// nil when some endpoint does not say.
func (c *Client) baseDirs(ctx context.Context) []string {
	dirs := make([]string, len(c.eps))
	for i, e := range c.eps {
		var list struct {
			Data []struct {
				ID     string  `json:"id"`
				Root   string  `json:"root"`
				Parent *string `json:"parent"`
			} `json:"data"`
		}
		err := c.call(ctx, e, http.MethodGet, pathModels, nil, func(b []byte) error { return json.Unmarshal(b, &list) })
		if err != nil {
			c.log.Debug().Str(logEndpoint, e.shown).Str(logError, err.Error()).Msg("no base model directory: the base model cannot be sampled after weights")
			return nil
		}
		for _, m := range list.Data {
			if m.Parent == nil && m.Root != "" && (c.opts.Model == "" || m.ID == c.opts.Model) {
				dirs[i] = m.Root
				break
			}
		}
		if dirs[i] == "" {
			return nil
		}
	}
	return dirs
}

// reloadWeights tells every endpoint i to reload its weights from
// dirs[i] and to drop its prefix cache.
func (c *Client) reloadWeights(ctx context.Context, name string, dirs []string) error {
	dir := dirs[0]
	bodies := make([][]byte, len(dirs))
	for i, d := range dirs {
		b, err := json.Marshal(map[string]any{"method": "reload_weights", "kwargs": map[string]string{"weights_path": d}})
		if err != nil {
			return fmt.Errorf("openai: load weights %q from %s: encode the request: %w", name, d, err)
		}
		bodies[i] = b
	}
	errs := c.onEach(ctx, pathRPC, bodies, func(i int, ce *callError) error {
		if ce != nil && refusedWeights(ce) {
			ce.advice = weightsAdvice(ce, dirs[i])
		}
		if ce == nil {
			return nil
		}
		return ce
	})
	if err := errors.Join(errs...); err != nil {
		err = fmt.Errorf("openai: load weights %q from %s: %w", name, dir, err)
		for _, e := range errs {
			if ce := (*callError)(nil); errors.As(e, &ce) && refusedWeights(ce) {
				return weightsRefused{err}
			}
		}
		return err
	}
	// A cached prefix holds the old weights' keys and values.
	errs = c.onEvery(ctx, pathResetPrefix, nil, func(_ int, ce *callError) error {
		if ce == nil {
			return nil
		}
		return ce
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("openai: load weights %q from %s: reset the prefix cache: %w", name, dir, err)
	}
	return nil
}

// weightsRefused is a reload error that matches ErrWeightsRefused, its
// message unchanged.
type weightsRefused struct{ err error }

func (r weightsRefused) Error() string   { return r.err.Error() }
func (r weightsRefused) Unwrap() []error { return []error{r.err, ErrWeightsRefused} }

// refusedWeights reports whether a failed reload was refused: a 4xx
// other than 408 and 429 (a 404: no dev endpoints), or vLLM's 500 from
// the worker ("Call to collective_rpc method failed: Worker failed with
// error ...").
func refusedWeights(ce *callError) bool {
	return ce != nil && ce.path == pathRPC && refusedFor(ce, "collective_rpc")
}

// weightsAdvice is the next step after a server refused to reload the
// weights in dir.
func weightsAdvice(ce *callError, dir string) string {
	m := ce.msg
	switch {
	case ce.status == http.StatusNotFound:
		return "the server at " + ce.endpoint + " has no weight-reload endpoint: restart vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (its /collective_rpc reloads weights), or train a LoRA adapter"
	case strings.Contains(m, "Cannot find any model weights") || strings.Contains(m, "Repo id") || strings.Contains(m, "No such file"):
		return "the server reads " + dir + " itself and finds no weights there: give it a path it can read (policy.adapter_root, a shared mount) holding config.json and model.safetensors (or shards and model.safetensors.index.json)"
	}
	return "the server could not load the weights in " + dir + ": check that they are of the model it serves (same architecture, names and shapes) and see the log of the server at " + ce.endpoint
}
