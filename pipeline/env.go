package pipeline

import (
	"cmp"
	"fmt"
	"time"
)

// Resources a task needs while it runs. The local executor admits a task
// only when the machine has them free.
type Resources struct {
	CPU      float64 `yaml:"cpu" json:"cpu,omitempty"`             // cores
	MemoryMB int     `yaml:"memory_mb" json:"memory_mb,omitempty"` // MiB
	GPU      int     `yaml:"gpu" json:"gpu,omitempty"`
	GPUType  string  `yaml:"gpu_type" json:"gpu_type,omitempty"`
}

// Retry says how often and how patiently a failed attempt is retried.
// The wait before retry n (1-based) is min(Backoff·Factor^(n-1), MaxBackoff).
type Retry struct {
	Attempts   int           `yaml:"attempts" json:"attempts,omitempty"` // total attempts, ≥ 1
	Backoff    time.Duration `yaml:"backoff" json:"backoff,omitempty"`
	Factor     float64       `yaml:"factor" json:"factor,omitempty"`
	MaxBackoff time.Duration `yaml:"max_backoff" json:"max_backoff,omitempty"`
}

// Wait returns the pause before retry n (n ≥ 1).
func (r Retry) Wait(n int) time.Duration {
	d := float64(r.Backoff)
	for i := 1; i < n; i++ {
		d *= r.Factor
		if r.MaxBackoff > 0 && d >= float64(r.MaxBackoff) {
			return r.MaxBackoff
		}
	}
	if r.MaxBackoff > 0 && time.Duration(d) > r.MaxBackoff {
		return r.MaxBackoff
	}
	return time.Duration(d)
}

// CacheMode says whether a task's results are reused.
type CacheMode string

// Cache modes.
const (
	CacheAuto    CacheMode = "auto"    // reuse when the key matches
	CacheDisable CacheMode = "disable" // always run
)

// Cache is a task's cache policy. Version and Salt enter the cache key:
// bump Version when the code changes meaning; Salt forces fresh results.
type Cache struct {
	Mode    CacheMode `yaml:"mode" json:"mode,omitempty"`
	Version string    `yaml:"version" json:"version,omitempty"`
	Salt    string    `yaml:"salt" json:"salt,omitempty"`
}

// Settings are the knobs of a task environment. A zero field means "not
// set here": settings resolve environment → task → per-call override, the
// later non-zero field winning.
type Settings struct {
	Resources   Resources     `yaml:"resources" json:"resources"`
	Retry       Retry         `yaml:"retries" json:"retries"`
	Timeout     time.Duration `yaml:"timeout" json:"timeout,omitempty"`   // per attempt
	Deadline    time.Duration `yaml:"deadline" json:"deadline,omitempty"` // over all attempts
	Cache       Cache         `yaml:"cache" json:"cache"`
	Concurrency int           `yaml:"concurrency" json:"concurrency,omitempty"` // tasks of this env at once
	Reuse       *bool         `yaml:"reuse" json:"reuse,omitempty"`             // keep warm state between calls
}

// Env is a named task environment.
type Env struct {
	Name string
	Settings
}

// Defaults applied under every environment.
var defaultSettings = Settings{
	Resources:   Resources{CPU: 1},
	Retry:       Retry{Attempts: 1, Backoff: 200 * time.Millisecond, Factor: 2, MaxBackoff: 30 * time.Second},
	Cache:       Cache{Mode: CacheAuto},
	Concurrency: 0, // bounded by resources only
}

// Merge returns s with every non-zero field of o applied over it.
func (s Settings) Merge(o Settings) Settings {
	s.Resources.CPU = cmp.Or(o.Resources.CPU, s.Resources.CPU)
	s.Resources.MemoryMB = cmp.Or(o.Resources.MemoryMB, s.Resources.MemoryMB)
	s.Resources.GPU = cmp.Or(o.Resources.GPU, s.Resources.GPU)
	s.Resources.GPUType = cmp.Or(o.Resources.GPUType, s.Resources.GPUType)
	s.Retry.Attempts = cmp.Or(o.Retry.Attempts, s.Retry.Attempts)
	s.Retry.Backoff = cmp.Or(o.Retry.Backoff, s.Retry.Backoff)
	s.Retry.Factor = cmp.Or(o.Retry.Factor, s.Retry.Factor)
	s.Retry.MaxBackoff = cmp.Or(o.Retry.MaxBackoff, s.Retry.MaxBackoff)
	s.Timeout = cmp.Or(o.Timeout, s.Timeout)
	s.Deadline = cmp.Or(o.Deadline, s.Deadline)
	s.Cache.Mode = cmp.Or(o.Cache.Mode, s.Cache.Mode)
	s.Cache.Version = cmp.Or(o.Cache.Version, s.Cache.Version)
	s.Cache.Salt = cmp.Or(o.Cache.Salt, s.Cache.Salt)
	s.Concurrency = cmp.Or(o.Concurrency, s.Concurrency)
	s.Reuse = cmp.Or(o.Reuse, s.Reuse)
	return s
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	switch {
	case s.Resources.CPU < 0 || s.Resources.MemoryMB < 0 || s.Resources.GPU < 0:
		return fmt.Errorf("%w: resources cannot be negative", ErrConfig)
	case s.Retry.Attempts < 1:
		return fmt.Errorf("%w: retries.attempts must be at least 1", ErrConfig)
	case s.Retry.Factor != 0 && s.Retry.Factor < 1:
		return fmt.Errorf("%w: retries.factor must be at least 1", ErrConfig)
	case s.Timeout < 0 || s.Deadline < 0:
		return fmt.Errorf("%w: timeouts cannot be negative", ErrConfig)
	case s.Cache.Mode != CacheAuto && s.Cache.Mode != CacheDisable:
		return fmt.Errorf("%w: cache mode %q (use auto or disable)", ErrConfig, s.Cache.Mode)
	case s.Concurrency < 0:
		return fmt.Errorf("%w: concurrency cannot be negative", ErrConfig)
	}
	return nil
}

func (s Settings) reuse() bool { return s.Reuse != nil && *s.Reuse }
