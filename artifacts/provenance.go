package artifacts

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Provenance says where an artifact came from. It is stored as object
// metadata under the keys below, so that it travels with the object on
// every backend and survives copies, branches and merges.
type Provenance struct {
	// Task and TaskVersion name the producing task.
	Task        string `json:"task"`
	TaskVersion string `json:"task_version,omitempty"`
	// Inputs maps each input's name (or REF:PATH) to its content checksum.
	Inputs map[string]string `json:"inputs,omitempty"`
	// ConfigHash is the hash of the (redacted) run configuration.
	ConfigHash string `json:"config_hash,omitempty"`
	// PolicyVersion is the adapter digest the artifact was produced with.
	PolicyVersion string `json:"policy_version,omitempty"`
	// Seed is the RNG seed the task used, if any.
	Seed *int64 `json:"seed,omitempty"`
	// CreatedAt is when the artifact was written (UTC).
	CreatedAt time.Time `json:"created_at"`
}

// Metadata keys that hold provenance. They are lower case with dashes so
// they survive HTTP header canonicalisation on lakeFS.
const (
	MetaTask          = "rlpipe-task"
	MetaTaskVersion   = "rlpipe-task-version"
	MetaInputs        = "rlpipe-inputs"
	MetaConfigHash    = "rlpipe-config-hash"
	MetaPolicyVersion = "rlpipe-policy-version"
	MetaSeed          = "rlpipe-seed"
	MetaCreatedAt     = "rlpipe-created-at"
)

// Metadata encodes the provenance as object metadata, merged into extra
// (which may be nil). Inputs are encoded as JSON with sorted keys so that
// equal provenance gives equal metadata.
func (p Provenance) Metadata(extra map[string]string) (map[string]string, error) {
	m := make(map[string]string, len(extra)+7)
	for k, v := range extra {
		m[k] = v
	}
	m[MetaTask] = p.Task
	if p.TaskVersion != "" {
		m[MetaTaskVersion] = p.TaskVersion
	}
	if len(p.Inputs) > 0 {
		var pairs [][2]string
		for _, k := range slices.Sorted(maps.Keys(p.Inputs)) {
			pairs = append(pairs, [2]string{k, p.Inputs[k]})
		}
		b, err := json.Marshal(pairs)
		if err != nil {
			return nil, fmt.Errorf("provenance of task %s: encode inputs: %w", p.Task, err)
		}
		m[MetaInputs] = string(b)
	}
	if p.ConfigHash != "" {
		m[MetaConfigHash] = p.ConfigHash
	}
	if p.PolicyVersion != "" {
		m[MetaPolicyVersion] = p.PolicyVersion
	}
	if p.Seed != nil {
		m[MetaSeed] = strconv.FormatInt(*p.Seed, 10)
	}
	if !p.CreatedAt.IsZero() {
		m[MetaCreatedAt] = p.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	return m, nil
}

// ProvenanceFromMetadata decodes provenance from object metadata. ok is
// false when the object carries none (it was imported, not produced).
func ProvenanceFromMetadata(m map[string]string) (p Provenance, ok bool, err error) {
	task, ok := m[MetaTask]
	if !ok {
		return Provenance{}, false, nil
	}
	p.Task = task
	p.TaskVersion = m[MetaTaskVersion]
	p.ConfigHash = m[MetaConfigHash]
	p.PolicyVersion = m[MetaPolicyVersion]
	if s := m[MetaInputs]; s != "" {
		var pairs [][2]string
		if err := json.Unmarshal([]byte(s), &pairs); err != nil {
			return p, true, fmt.Errorf("%w: provenance %s: %v", ErrInvalid, MetaInputs, err)
		}
		p.Inputs = make(map[string]string, len(pairs))
		for _, kv := range pairs {
			p.Inputs[kv[0]] = kv[1]
		}
	}
	if s := m[MetaSeed]; s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return p, true, fmt.Errorf("%w: provenance %s=%q: %v", ErrInvalid, MetaSeed, s, err)
		}
		p.Seed = &v
	}
	if s := m[MetaCreatedAt]; s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return p, true, fmt.Errorf("%w: provenance %s=%q: %v", ErrInvalid, MetaCreatedAt, s, err)
		}
		p.CreatedAt = t
	}
	return p, true, nil
}
