package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/rlpipe/rlpipe/artifacts"
)

// The cache and the memo records live on their own branch, shared by every
// run of the repository, so a result computed by one run is reused by any
// other. A cache entry is a small manifest naming where the outputs are;
// a hit links them into place (artifacts.Copier) without copying bytes.
const (
	CacheBranch = "rlpipe-cache"
	LockBranch  = "rlpipe-locks"
)

func digestBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// CodeDigest is a task version: code (a stage's code version, such as
// "rollout-1") and the first 8 bytes of the SHA-256 of v's JSON, in hex.
// v holds what makes the task's work different (its options, the
// policy's identity); JSON that cannot hold it (a NaN) is the error.
func CodeDigest(code string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return code + "-" + hex.EncodeToString(sum[:8]), nil
}

// canonicalJSON encodes v with map keys sorted at every depth.
func canonicalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// keyInput is what enters a cache key.
type keyInput struct {
	Task    string      `json:"task"`
	Version string      `json:"version"`
	Cache   string      `json:"cache_version"`
	Salt    string      `json:"salt"`
	Inputs  [][2]string `json:"inputs"`
	Params  json.RawMessage
	Outputs []string `json:"outputs"`
	Seed    uint64   `json:"seed,omitempty"`
}

// cacheKey = hash(task name + versions + salt + input digests (minus the
// ignored) + canonical params + declared outputs + the task's seed, unless
// the task is declared Deterministic).
func cacheKey(t *Task, s Settings, inputs map[string]Artifact, params json.RawMessage, seed uint64) (string, error) {
	ignored := map[string]bool{}
	for _, n := range t.IgnoreInputs {
		ignored[n] = true
	}
	k := keyInput{Task: t.Name, Version: t.Version, Cache: s.Cache.Version, Salt: s.Cache.Salt, Params: params, Seed: seed}
	for name, a := range inputs {
		if !ignored[name] {
			d, err := a.digest()
			if err != nil {
				return "", fmt.Errorf("input %s: %w", name, err)
			}
			k.Inputs = append(k.Inputs, [2]string{name, d})
		}
	}
	sort.Slice(k.Inputs, func(i, j int) bool { return k.Inputs[i][0] < k.Inputs[j][0] })
	for _, o := range t.Outputs {
		k.Outputs = append(k.Outputs, o.Name+"="+o.file())
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", fmt.Errorf("encode the cache key: %w", err)
	}
	return digestBytes(b), nil
}

// manifest is a cache entry.
type manifest struct {
	Key     string              `json:"key"`
	Task    string              `json:"task"`
	Outputs map[string]Artifact `json:"outputs"`
}

type cache struct {
	store artifacts.Store
}

func manifestPath(key string) string { return "cache/" + key[:2] + "/" + key + ".json" }

func (c *cache) lookup(ctx context.Context, key string) (*manifest, error) {
	var m manifest
	found, decoded, err := getJSON(ctx, c.store, CacheBranch, manifestPath(key), &m)
	if err != nil {
		return nil, fmt.Errorf("cache lookup %s: %w", key[:12], err)
	}
	if !found || !decoded {
		return nil, nil // an unreadable entry is a miss; it will be rewritten
	}
	return &m, nil
}

// getJSON decodes the JSON object at ref:path of st into v, for the
// engine's own records (cache manifests, memo records, the run lock).
// found is false when there is no such object; decoded is false when it
// is not JSON of v's shape, which each caller treats in its own way (a
// miss, a stale lock). A store error is returned as it is.
func getJSON(ctx context.Context, st artifacts.Store, ref, path string, v any) (found, decoded bool, err error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if errors.Is(err, artifacts.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer rc.Close()
	return true, json.NewDecoder(rc).Decode(v) == nil, nil
}

func (c *cache) record(ctx context.Context, m *manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = c.store.PutObject(ctx, CacheBranch, manifestPath(m.Key), bytes.NewReader(b), &artifacts.PutOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("cache record %s: %w", m.Key[:12], err)
	}
	return nil
}

// link places src at branch:dst, reusing bytes when the store can, and
// checks that the result has the expected checksum. ok is false when the
// source is gone or changed (a miss, not an error).
func link(ctx context.Context, st artifacts.Store, src Artifact, srcPath, wantSum, branch, dst string) (ok bool, err error) {
	if cur, err := st.StatObject(ctx, branch, dst); err == nil && cur.Checksum == wantSum {
		return true, nil // already in place (a resumed run)
	}
	if cp, isCopier := st.(artifacts.Copier); isCopier {
		info, err := cp.CopyObject(ctx, src.Ref, srcPath, branch, dst)
		if errors.Is(err, artifacts.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return info.Checksum == wantSum, nil
	}
	rc, _, err := st.GetObject(ctx, src.Ref, srcPath)
	if errors.Is(err, artifacts.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	info, err := st.PutObject(ctx, branch, dst, rc, nil)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, rc)
	return info.Checksum == wantSum, nil
}
