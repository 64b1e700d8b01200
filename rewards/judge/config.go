package judge

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/rlpipe/rlpipe/policy/openai/retry"
)

// Defaults of the knobs a zero Config leaves unset.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultRetries     = retry.DefaultRetries
	DefaultBackoff     = retry.DefaultBackoff
	DefaultMaxBackoff  = retry.DefaultMaxBackoff
	DefaultConcurrency = 8
)

// keyFormat enters every memo key; bump it when the request or the score
// parsing changes meaning, so recorded scores are not replayed.
const keyFormat = 1

// Config describes one judge: which model, asked what, and how its answer
// becomes a score. It holds no secret: the API key is read from the
// environment variable APIKeyEnv names, so a Config can be logged and saved.
type Config struct {
	// Name labels the judge in logs and errors.
	Name string `yaml:"name"`
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or a vLLM
	// server's http://host:8000/v1; requests go to BaseURL/chat/completions.
	BaseURL string `yaml:"base_url"`
	// Model is the model name sent with each request.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key (e.g.
	// OPENAI_API_KEY). Empty: requests carry no Authorization header (a
	// local server).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`

	// Rubric is a text/template rendered over an Input into the user
	// message: {{.Prompt}}, {{.Completion}}, {{.Answer}} and
	// {{.Metadata.KEY}}. It must ask for a score the parser can find.
	Rubric string `yaml:"rubric"`
	// ScorePattern is a regular expression with one capturing group around
	// the score; the last match wins. Empty: the last "Score: N" or JSON
	// "score": N, else the last bare number within [Min, Max].
	ScorePattern string `yaml:"score_pattern,omitempty"`
	// Min and Max bound a valid score (both zero: 0 and 1). A score
	// outside has status out_of_range.
	Min float64 `yaml:"min,omitempty"`
	Max float64 `yaml:"max,omitempty"`

	// Temperature, MaxTokens (0: the server's default) and Seed (nil: none)
	// are sent with each request.
	Temperature float64 `yaml:"temperature,omitempty"`
	MaxTokens   int     `yaml:"max_tokens,omitempty"`
	Seed        *int    `yaml:"seed,omitempty"`

	// Timeout bounds one HTTP request (default 60s).
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Retries is how many times a request is repeated after a 408, a 429,
	// a 5xx, a timeout, a connection error or unusable JSON (0: 4;
	// negative: none); see policy/openai/retry. Waits grow
	// from Backoff (default 500ms) by doubling, with jitter, up to
	// MaxBackoff (default 30s); a Retry-After from the server replaces the
	// wait, still capped by MaxBackoff.
	Retries    int           `yaml:"retries,omitempty"`
	Backoff    time.Duration `yaml:"backoff,omitempty"`
	MaxBackoff time.Duration `yaml:"max_backoff,omitempty"`
	// Concurrency caps the requests in flight per Judge (default 8).
	Concurrency int `yaml:"concurrency,omitempty"`

	// PriceInPerMTok and PriceOutPerMTok are the prices of a million
	// prompt and completion tokens, for Result.Cost and Usage.Cost.
	PriceInPerMTok  float64 `yaml:"price_in_per_mtok,omitempty"`
	PriceOutPerMTok float64 `yaml:"price_out_per_mtok,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.Min == 0 && c.Max == 0 {
		c.Max = 1
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	c.Retries, c.Backoff, c.MaxBackoff = retry.Defaults(c.Retries, c.Backoff, c.MaxBackoff)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c
}

// configKey is the part of a Config that can change a judge's answer.
type configKey struct {
	Format       int     `json:"format"`
	BaseURL      string  `json:"base_url"`
	Model        string  `json:"model"`
	Rubric       string  `json:"rubric"`
	ScorePattern string  `json:"score_pattern,omitempty"`
	Min          float64 `json:"min"`
	Max          float64 `json:"max"`
	Temperature  float64 `json:"temperature"`
	MaxTokens    int     `json:"max_tokens,omitempty"`
	Seed         *int    `json:"seed,omitempty"`
}

// Key returns the judge's part of a memo key, a JSON-encodable value: the
// endpoint (without user info or query), the model, the rubric, the
// parsing and the sampling settings. It leaves out what cannot change an
// answer: the name, the key variable, timeouts, retries, concurrency and
// prices.
func (c Config) Key() any {
	c = c.withDefaults()
	return configKey{
		Format:       keyFormat,
		BaseURL:      endpointKey(c.BaseURL),
		Model:        c.Model,
		Rubric:       c.Rubric,
		ScorePattern: c.ScorePattern,
		Min:          c.Min,
		Max:          c.Max,
		Temperature:  c.Temperature,
		MaxTokens:    c.MaxTokens,
		Seed:         c.Seed,
	}
}

// endpointKey drops what may carry a credential from a base URL.
func endpointKey(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimRight(u.String(), "/")
}

// compiled is a validated Config, ready to render and parse.
type compiled struct {
	Config
	endpoint string // BaseURL/chat/completions
	shown    string // the endpoint as errors show it
	rubric   *template.Template
	pattern  *regexp.Regexp // nil: the default parsing
}

func (c Config) compile() (*compiled, error) {
	c = c.withDefaults()
	name := c.Name
	if name == "" {
		name = c.Model
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: judge %q: %s", ErrConfig, name, fmt.Sprintf(format, args...))
	}
	if c.Model == "" {
		return nil, bad("model is empty: name the model the server serves")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("base_url %q is not an http(s) URL such as https://api.openai.com/v1", c.BaseURL)
	}
	if c.Max <= c.Min {
		return nil, bad("max (%g) must be greater than min (%g)", c.Max, c.Min)
	}
	if c.Timeout < 0 || c.Backoff < 0 || c.MaxBackoff < 0 || c.Concurrency < 0 || c.MaxTokens < 0 {
		return nil, bad("timeout, backoff, max_backoff, concurrency and max_tokens cannot be negative")
	}
	if c.PriceInPerMTok < 0 || c.PriceOutPerMTok < 0 {
		return nil, bad("prices cannot be negative")
	}
	out := &compiled{Config: c}
	ep := *u // a query (Azure's api-version) stays on the endpoint
	ep.Path = strings.TrimRight(ep.Path, "/") + "/chat/completions"
	ep.RawPath, ep.Fragment = "", ""
	out.endpoint = ep.String()
	ep.User, ep.RawQuery = nil, ""
	out.shown = ep.String()
	if c.ScorePattern != "" {
		re, err := regexp.Compile(c.ScorePattern)
		if err != nil {
			return nil, bad("score_pattern: %v", err)
		}
		if re.NumSubexp() != 1 {
			return nil, bad("score_pattern %q needs exactly one capturing group around the score, it has %d; make the others (?:...)", c.ScorePattern, re.NumSubexp())
		}
		out.pattern = re
	}
	if out.rubric, err = compileRubric(c.Rubric, c.ScorePattern == ""); err != nil {
		return nil, bad("%v", err)
	}
	return out, nil
}

// compileRubric parses the rubric and renders it once over a sample Input,
// which catches unknown fields before the first request.
func compileRubric(text string, needScoreWord bool) (*template.Template, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("rubric is empty: write the instructions to the judge, e.g. %q", "Grade the answer to {{.Prompt}}: {{.Completion}}. Reply with 'Score: <0 or 1>'.")
	}
	t, err := template.New("rubric").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("rubric: %w", err)
	}
	var sb strings.Builder
	sample := Input{Metadata: map[string]any{}}
	if err := lenient(t).Execute(&sb, sample); err != nil {
		return nil, fmt.Errorf("rubric: %w; the fields are {{.Prompt}}, {{.Completion}}, {{.Answer}} and {{.Metadata.KEY}}", err)
	}
	if needScoreWord && !strings.Contains(strings.ToLower(text), "score") {
		return nil, fmt.Errorf("the rubric never asks for a score; end it with an instruction such as %q, or set score_pattern", "Reply with 'Score: <number>'")
	}
	return t, nil
}

// lenient is the rubric with missing metadata keys rendered empty: at New
// the keys an input will carry are unknown.
func lenient(t *template.Template) *template.Template {
	c, err := t.Clone()
	if err != nil {
		return t
	}
	return c.Option("missingkey=zero")
}
