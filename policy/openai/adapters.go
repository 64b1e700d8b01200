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

// ErrAdapterRefused is the error of a LoadAdapter that a server refused
// for the adapter itself: a rank above vLLM's --max-lora-rank, files it
// cannot read, a directory it cannot see. Loading it again cannot succeed,
// so it also matches policy.ErrAdapterInput.
var ErrAdapterRefused = fmt.Errorf("%w: a server refused it", policy.ErrAdapterInput)

// refused is a load error that matches ErrAdapterRefused, its message
// unchanged.
type refused struct{ err error }

func (r refused) Error() string   { return r.err.Error() }
func (r refused) Unwrap() []error { return []error{r.err, ErrAdapterRefused} }

// refusedAdapter reports whether a failed load was refused for the
// adapter: a 4xx other than 408 and 429, or vLLM's 500 from add_lora
// ("Call to add_lora method failed: Worker failed with error ...").
func refusedAdapter(ce *callError) bool {
	return refusedFor(ce, "add_lora")
}

// refusedFor reports whether a server refused what a call asked for: a
// 4xx other than 408 and 429, or vLLM's 500 whose message names the
// engine method that failed (method).
func refusedFor(ce *callError, method string) bool {
	if ce == nil || ce.kind != kindStatus {
		return false
	}
	switch s := ce.status; {
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests:
		return false
	case s >= 400 && s < 500:
		return true
	}
	return ce.status == http.StatusInternalServerError && strings.Contains(ce.msg, method)
}

// adapterAdvice is the next step after a server refused the adapter in
// dir.
func adapterAdvice(ce *callError, dir string) string {
	m := ce.msg
	switch {
	case strings.Contains(m, "max_lora_rank"):
		return "the adapter's rank (r in " + dir + "/adapter_config.json) is above the server's limit: restart vLLM with --max-lora-rank at least r (1, 8, 16, 32, 64, …), or train a lower rank"
	case ce.status == http.StatusNotFound || strings.Contains(m, "No adapter found"):
		return "the server reads " + dir + " itself and finds no adapter there: give it a path it can read (policy.adapter_root, a shared mount) holding adapter_config.json and adapter_model.safetensors"
	case strings.Contains(m, "target_modules") || strings.Contains(m, "not supported"):
		return "the adapter targets modules the server's model cannot take: compare target_modules in " + dir + "/adapter_config.json with the base model"
	}
	return "the server could not load " + dir + ": check its adapter_config.json and adapter_model.safetensors (written by a PEFT trainer for this base model) and see the log of the server at " + ce.endpoint
}

// LoadAdapter loads the PEFT adapter directory dir as name on every
// endpoint, with vLLM's POST /v1/load_lora_adapter {"lora_name": name,
// "lora_path": dir}. The servers read dir themselves: it must be a path
// each server can read (a shared file system, or a copy at the same path
// on every host), not a path on the client's machine. vLLM needs
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora.
//
// A server that already holds name counts as loaded, so give every
// checkpoint a new name (step-000120, not "latest"). If some endpoint
// fails, the adapter is unloaded again from those that took it, and the
// error names each failure: after LoadAdapter either every endpoint holds
// the adapter or the client records none.
func (c *Client) LoadAdapter(ctx context.Context, name, dir string) error {
	if name == "" || dir == "" {
		return fmt.Errorf("openai: load adapter %q from %q: name and directory must not be empty", name, dir)
	}
	c.amu.Lock()
	defer c.amu.Unlock()
	body, err := json.Marshal(map[string]string{"lora_name": name, "lora_path": dir})
	if err != nil {
		return fmt.Errorf("openai: load adapter %q from %s: encode the request: %w", name, dir, err)
	}
	undo, err := json.Marshal(map[string]string{"lora_name": name})
	if err != nil {
		return fmt.Errorf("openai: load adapter %q from %s: encode the unload request: %w", name, dir, err)
	}
	fresh := make([]bool, len(c.eps)) // loaded by this call, not before
	errs := c.onEvery(ctx, pathLoad, body, func(i int, ce *callError) error {
		if ce == nil {
			fresh[i] = true
			return nil
		}
		if ce.status == http.StatusBadRequest && strings.Contains(strings.ToLower(ce.msg), "already") {
			return nil // vLLM: "The lora adapter 'x' has already been loaded."
		}
		if refusedAdapter(ce) {
			ce.advice = adapterAdvice(ce, dir)
		}
		return ce
	})
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() == nil {
			for i, e := range c.eps {
				if fresh[i] {
					_ = c.call(ctx, e, http.MethodPost, pathUnload, undo, nil)
				}
			}
		}
		err = fmt.Errorf("openai: load adapter %q from %s: %w", name, dir, err)
		for _, e := range errs {
			if ce := (*callError)(nil); errors.As(e, &ce) && refusedAdapter(ce) {
				return refused{err} // some endpoint refused the adapter itself
			}
		}
		return err
	}
	c.adapters = slices.DeleteFunc(c.adapters, func(a policy.LoadedAdapter) bool { return a.Name == name })
	c.adapters = append(c.adapters, policy.LoadedAdapter{Name: name, Dir: dir})
	c.log.Info().Str(logAdapter, name).Int("endpoints", len(c.eps)).Msg("adapter loaded")
	return nil
}

// UnloadAdapter unloads name from every endpoint with POST
// /v1/unload_lora_adapter {"lora_name": name}. An endpoint that does not
// hold it counts as done.
func (c *Client) UnloadAdapter(ctx context.Context, name string) error {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.unload(ctx, name)
}

func (c *Client) unload(ctx context.Context, name string) error {
	body, err := json.Marshal(map[string]string{"lora_name": name})
	if err != nil {
		return fmt.Errorf("openai: unload adapter %q: encode the request: %w", name, err)
	}
	errs := c.onEvery(ctx, pathUnload, body, func(_ int, ce *callError) error {
		if ce == nil || ce.status == http.StatusNotFound {
			return nil
		}
		if m := strings.ToLower(ce.msg); ce.status == http.StatusBadRequest &&
			(strings.Contains(m, "not found") || strings.Contains(m, "cannot be found")) {
			return nil
		}
		return ce
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("openai: unload adapter %q: %w", name, err)
	}
	c.adapters = slices.DeleteFunc(c.adapters, func(a policy.LoadedAdapter) bool { return a.Name == name })
	c.log.Info().Str(logAdapter, name).Msg("adapter unloaded")
	return nil
}

// PruneAdapters unloads every adapter loaded through this client except
// the keep newest, oldest first, and returns the names it unloaded. It
// stops at the first failure.
func (c *Client) PruneAdapters(ctx context.Context, keep int) ([]string, error) {
	c.amu.Lock()
	defer c.amu.Unlock()
	var done []string
	for len(c.adapters) > max(keep, 0) {
		name := c.adapters[0].Name
		if err := c.unload(ctx, name); err != nil {
			return done, err
		}
		done = append(done, name)
	}
	return done, nil
}

// Adapters lists the adapters loaded through this client, oldest first.
func (c *Client) Adapters() []string {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.adapters.Names()
}

// onEvery posts body to path on every endpoint at once, with retries, and
// returns check's verdict on each outcome (nil: success).
func (c *Client) onEvery(ctx context.Context, path string, body []byte, check func(i int, ce *callError) error) []error {
	return c.onEach(ctx, path, slices.Repeat([][]byte{body}, len(c.eps)), check)
}

// onEach is onEvery posting bodies[i] to endpoint i.
func (c *Client) onEach(ctx context.Context, path string, bodies [][]byte, check func(i int, ce *callError) error) []error {
	errs := make([]error, len(c.eps))
	var wg sync.WaitGroup
	for i, e := range c.eps {
		wg.Go(func() {
			err := c.call(ctx, e, http.MethodPost, path, bodies[i], nil)
			var ce *callError
			switch {
			case err == nil:
				errs[i] = check(i, nil)
			case errors.As(err, &ce):
				errs[i] = check(i, ce)
			default:
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errs
}

// Models asks every endpoint for GET /v1/models and returns the model ids
// each serves (the base model and its loaded adapters, on vLLM), keyed by
// endpoint. An endpoint that fails leaves its key out and adds to the
// error.
func (c *Client) Models(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	var mu sync.Mutex
	errs := make([]error, len(c.eps))
	var wg sync.WaitGroup
	for i, e := range c.eps {
		wg.Go(func() {
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			err := c.call(ctx, e, http.MethodGet, pathModels, nil, func(b []byte) error {
				if err := json.Unmarshal(b, &list); err != nil {
					return malformed(b, err)
				}
				return nil
			})
			if err != nil {
				errs[i] = err
				return
			}
			ids := make([]string, len(list.Data))
			for k, m := range list.Data {
				ids[k] = m.ID
			}
			mu.Lock()
			out[e.shown] = ids
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("openai: list models: %w", err)
	}
	return out, nil
}
