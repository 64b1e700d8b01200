package judge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/rewards/judge"
)

const (
	testKeyEnv = "RLPIPE_TEST_JUDGE_KEY"
	testKey    = "sk-test-0123456789abcdef"
	rubric     = "Question: {{.Prompt}}\nAnswer: {{.Completion}}\nReference: {{.Answer}}\nReply with Score: <0..1>."
)

// env serves the test key.
func env(name string) string {
	if name == testKeyEnv {
		return testKey
	}
	return ""
}

// testConfig is a judge of f with short timeouts and waits.
func testConfig(f *fakeAPI) judge.Config {
	return judge.Config{
		Name: "test", BaseURL: f.URL, Model: "judge-model", APIKeyEnv: testKeyEnv,
		Rubric:  rubric,
		Timeout: time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	}
}

func newJudge(t *testing.T, cfg judge.Config, opts *judge.Options) *judge.Judge {
	t.Helper()
	if opts == nil {
		opts = &judge.Options{}
	}
	if opts.Getenv == nil {
		opts.Getenv = env
	}
	j, err := judge.New(cfg, opts)
	if err != nil {
		t.Fatalf("new judge: %v", err)
	}
	return j
}

func startFake(t *testing.T, answer func(int, seenRequest) reply) *fakeAPI {
	t.Helper()
	f := newFake(answer)
	t.Cleanup(f.Close)
	return f
}

// recordWaits makes j record its retry waits instead of sleeping them.
func recordWaits(j *judge.Judge) *[]time.Duration {
	var mu sync.Mutex
	waits := new([]time.Duration)
	judge.SetSleep(j, func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return nil
	})
	return waits
}

var in = judge.Input{Prompt: "2+2?", Completion: "4", Answer: "4"}

// memoTable is an in-memory Memoizer with pipeline's semantics: results and
// permanent errors are recorded under the key's JSON and replayed; other
// errors are not recorded.
type memoTable struct {
	mu      sync.Mutex
	records map[string]memoRecord
}

type memoRecord struct {
	result json.RawMessage
	err    string
}

func (m *memoTable) Memo(ctx context.Context, key any, out any, fn func(context.Context) (any, error)) error {
	k, err := json.Marshal(key)
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("memo key: %w", err))
	}
	m.mu.Lock()
	rec, ok := m.records[string(k)]
	m.mu.Unlock()
	if !ok {
		res, err := fn(ctx)
		if err != nil && !errors.Is(err, pipeline.ErrPermanent) {
			return err
		}
		if err != nil {
			rec.err = err.Error()
		} else if rec.result, err = json.Marshal(res); err != nil {
			return pipeline.Permanent(err)
		}
		m.mu.Lock()
		if m.records == nil {
			m.records = map[string]memoRecord{}
		}
		m.records[string(k)] = rec
		m.mu.Unlock()
		if err != nil {
			return err // the first call returns the error itself
		}
	}
	if rec.err != "" {
		return pipeline.Permanent(fmt.Errorf("recorded: %s", rec.err))
	}
	return json.Unmarshal(rec.result, out)
}

// dump is every key and record, for leak checks.
func (m *memoTable) dump() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sb strings.Builder
	for k, r := range m.records {
		fmt.Fprintf(&sb, "%s %s %s\n", k, r.result, r.err)
	}
	return sb.String()
}

func (m *memoTable) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

func TestScoreSendsTheRequestAndParsesFormats(t *testing.T) {
	for _, tc := range []struct {
		name, content, pattern string
		min, max               float64
		want                   float64
	}{
		{name: "score line", content: "The answer is correct.\nScore: 0.8", want: 0.8},
		{name: "markdown", content: "Reasoning...\n**Score:** 1", want: 1},
		{name: "json", content: "```json\n{\"reason\": \"ok\", \"score\": 0.25}\n```", want: 0.25},
		{name: "json string", content: `{"score": "0.5"}`, want: 0.5},
		{name: "last score wins", content: "Score: 0\nOn reflection... Score: 1", want: 1},
		{name: "bare number", content: "Mostly right, step 2 is weak.\n0.75", want: 0.75},
		{name: "thoughts skipped", content: "<think>Score: 0? no.</think>\nScore: 1", want: 1},
		{name: "out of ten", content: "Rating: 7/10", max: 10, want: 7},
		{name: "pattern", content: "VERDICT=3 (scale 1-5)", pattern: `VERDICT=(\d)`, min: 1, max: 5, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, says(tc.content))
			cfg := testConfig(f)
			cfg.ScorePattern, cfg.Min, cfg.Max = tc.pattern, tc.min, tc.max
			cfg.Temperature, cfg.MaxTokens, cfg.Seed = 0.5, 64, new(int)
			*cfg.Seed = 7
			res, err := newJudge(t, cfg, nil).Score(context.Background(), in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != judge.StatusOK || res.Score != tc.want || res.Raw != tc.content || res.Cached {
				t.Fatalf("result = %+v, want ok %g", res, tc.want)
			}
			reqs := f.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			b := reqs[0].Body
			wantMsg := "Question: 2+2?\nAnswer: 4\nReference: 4\nReply with Score: <0..1>."
			if reqs[0].Auth != "Bearer "+testKey || b.Model != "judge-model" || b.Temperature != 0.5 || b.MaxTokens != 64 ||
				b.Seed == nil || *b.Seed != 7 || len(b.Messages) != 1 || b.Messages[0].Role != "user" || b.Messages[0].Content != wantMsg {
				t.Fatalf("request = %+v (auth %q)", b, reqs[0].Auth)
			}
		})
	}
}

func TestAnswersWithoutAScoreAreResultsAndRecorded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rep        reply
		status     string
		score      float64
		reasonHas  string
		maxTokens  int
		scoreRange [2]float64
	}{
		{name: "garbage", rep: reply{Content: "I am not sure what to say here."}, status: judge.StatusUnparseable, reasonHas: "no score"},
		{name: "empty", rep: reply{Content: ""}, status: judge.StatusUnparseable, reasonHas: "empty"},
		{name: "no number in range", rep: reply{Content: "It deserves 80 percent."}, status: judge.StatusUnparseable, reasonHas: "last number is 80"},
		{name: "cut at max tokens", rep: reply{Content: "Let me think step by", Finish: "length"}, maxTokens: 5, status: judge.StatusUnparseable, reasonHas: "max_tokens (5)"},
		{name: "out of range", rep: reply{Content: "Score: 7"}, status: judge.StatusOutOfRange, score: 7, reasonHas: "outside [0, 1]"},
		{name: "below range", rep: reply{Content: "Score: -1"}, status: judge.StatusOutOfRange, score: -1},
		{name: "refusal", rep: reply{Refusal: "I can't help with that."}, status: judge.StatusRefused, reasonHas: "can't help"},
		{name: "content filter", rep: reply{Content: "", Finish: "content_filter"}, status: judge.StatusRefused, reasonHas: "content filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, func(int, seenRequest) reply { return tc.rep })
			cfg := testConfig(f)
			cfg.MaxTokens = tc.maxTokens
			j := newJudge(t, cfg, nil)
			memo := &memoTable{}
			res, err := j.Score(context.Background(), in, memo)
			if err != nil {
				t.Fatalf("an answer without a score is not an error: %v", err)
			}
			if res.Status != tc.status || res.Score != tc.score || !strings.Contains(res.Reason, tc.reasonHas) {
				t.Fatalf("result = %+v, want status %s score %g reason containing %q", res, tc.status, tc.score, tc.reasonHas)
			}
			again, err := j.Score(context.Background(), in, memo)
			if err != nil || !again.Cached || again.Status != res.Status || again.Reason != res.Reason || f.Calls() != 1 {
				t.Fatalf("replay = %+v, %v after %d requests; want the recorded result and one request", again, err, f.Calls())
			}
		})
	}
}

func TestRateLimitStormIsRetriedHonouringRetryAfter(t *testing.T) {
	f := startFake(t, func(n int, _ seenRequest) reply {
		if n <= 3 {
			return reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"},
				Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}
		}
		return reply{Content: "Score: 1", In: 5, Out: 1}
	})
	cfg := testConfig(f)
	cfg.MaxBackoff = 2 * time.Second
	j := newJudge(t, cfg, nil)
	waits := recordWaits(j)
	res, err := j.Score(context.Background(), in, nil)
	if err != nil || res.Status != judge.StatusOK || res.Score != 1 {
		t.Fatalf("score = %+v, %v; want ok 1 after the storm", res, err)
	}
	if fmt.Sprint(*waits) != "[1s 1s 1s]" {
		t.Fatalf("waits = %v, want Retry-After's 1s three times", *waits)
	}
	if u := j.Usage(); u.Requests != 4 || u.Retries != 3 || u.TokensIn != 5 {
		t.Fatalf("usage = %+v, want 4 requests, 3 retries, only the answered request's tokens", u)
	}

	// MaxBackoff caps a longer Retry-After; retry-after-ms is read first.
	f2 := startFake(t, func(n int, _ seenRequest) reply {
		if n == 1 {
			return reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "60"}}
		}
		if n == 2 {
			return reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}}
		}
		return reply{Content: "Score: 1"}
	})
	j2 := newJudge(t, judge.Config{Name: "x", BaseURL: f2.URL, Model: "m", Rubric: rubric, MaxBackoff: 2 * time.Second}, nil)
	waits = recordWaits(j2)
	if _, err := j2.Score(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*waits) != "[2s 250ms]" {
		t.Fatalf("waits = %v, want [2s 250ms]", *waits)
	}
}

func TestServerErrorsAreRetriedWithBackoff(t *testing.T) {
	f := startFake(t, func(n int, _ seenRequest) reply {
		switch n {
		case 1:
			return reply{Status: http.StatusInternalServerError, Body: "upstream exploded"}
		case 2:
			return reply{Status: http.StatusBadGateway}
		case 3:
			return reply{Body: `{"choices": [`} // JSON cut short: retried too (an HTML page is not: TestRetryPolicy)
		}
		return reply{Content: "Score: 0.5"}
	})
	cfg := testConfig(f)
	cfg.Backoff, cfg.MaxBackoff = 100*time.Millisecond, 300*time.Millisecond
	j := newJudge(t, cfg, nil)
	waits := recordWaits(j)
	res, err := j.Score(context.Background(), in, nil)
	if err != nil || res.Score != 0.5 {
		t.Fatalf("score = %+v, %v", res, err)
	}
	// Equal jitter: each wait is within [d/2, d] of 100ms, 200ms, 300ms (capped).
	bounds := [][2]time.Duration{{50 * time.Millisecond, 100 * time.Millisecond}, {100 * time.Millisecond, 200 * time.Millisecond}, {150 * time.Millisecond, 300 * time.Millisecond}}
	if len(*waits) != 3 {
		t.Fatalf("waits = %v, want 3", *waits)
	}
	for i, w := range *waits {
		if w < bounds[i][0] || w > bounds[i][1] {
			t.Fatalf("wait %d = %v, want within %v", i+1, w, bounds[i])
		}
	}
}

func TestHangingServerTimesOutThenGivesUp(t *testing.T) {
	f := startFake(t, func(int, seenRequest) reply { return reply{Hang: true} })
	cfg := testConfig(f)
	// Long enough that a request reaches the server on a loaded machine
	// before its time is up (each attempt must be counted).
	cfg.Timeout, cfg.Retries = 300*time.Millisecond, 2
	j := newJudge(t, cfg, nil)
	memo := &memoTable{}
	res, err := j.Score(context.Background(), in, memo)
	if !errors.Is(err, judge.ErrUnavailable) || errors.Is(err, pipeline.ErrPermanent) {
		t.Fatalf("err = %v, want ErrUnavailable, not permanent", err)
	}
	for _, want := range []string{"judge test", "gave up after 3 attempt(s)", "request timed out after 300ms", "/v1/chat/completions"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %q, want it to say %q", err, want)
		}
	}
	if res.Status != judge.StatusError || f.Calls() != 3 {
		t.Fatalf("result %+v after %d requests; want status error after 3", res, f.Calls())
	}
	// Not recorded: the next attempt asks again.
	if _, err := j.Score(context.Background(), in, memo); !errors.Is(err, judge.ErrUnavailable) || f.Calls() != 6 || memo.len() != 0 {
		t.Fatalf("second score: %v after %d requests, %d records; want 6 requests and nothing recorded", err, f.Calls(), memo.len())
	}
}

func TestCancelStopsAtOnce(t *testing.T) {
	f := startFake(t, func(int, seenRequest) reply { return reply{Hang: true} })
	f.arrived = make(chan int, 1)
	cfg := testConfig(f)
	cfg.Timeout = time.Hour
	j := newJudge(t, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-f.arrived; cancel() }()
	_, err := j.Score(ctx, in, &memoTable{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, judge.ErrUnavailable) || f.Calls() != 1 {
		t.Fatalf("err = %v after %d requests; want context.Canceled after 1", err, f.Calls())
	}
}

func TestClientErrorsArePermanent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rep      reply
		is       error
		says     string
		recorded bool
	}{
		{name: "400", rep: reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}`},
			is: judge.ErrRejected, says: "400 Bad Request: This model's maximum context length is 8192 tokens", recorded: true},
		{name: "422", rep: reply{Status: 422, Body: "unprocessable"}, is: judge.ErrRejected, says: "422 Unprocessable Entity: unprocessable", recorded: true},
		{name: "401", rep: reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: sk-test-****cdef"}}`},
			is: judge.ErrSetup, says: "401 Unauthorized: check the key in $" + testKeyEnv},
		{name: "403", rep: reply{Status: 403}, is: judge.ErrSetup, says: "403 Forbidden"},
		{name: "404", rep: reply{Status: 404, Body: `{"error":{"message":"The model judge-model does not exist"}}`}, is: judge.ErrSetup, says: "check base_url"},
		{name: "no quota", rep: reply{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
			is: judge.ErrSetup, says: "quota is exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, func(int, seenRequest) reply { return tc.rep })
			j := newJudge(t, testConfig(f), nil)
			memo := &memoTable{}
			_, err := j.Score(context.Background(), in, memo)
			if !errors.Is(err, tc.is) || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v; want %v, permanent, saying %q", err, tc.is, tc.says)
			}
			if f.Calls() != 1 || j.Usage().Retries != 0 {
				t.Fatalf("%d requests; want 1, no retries", f.Calls())
			}
			if strings.Contains(err.Error(), "****cdef") {
				t.Fatalf("err = %v; a 401 body may quote the key and is left out", err)
			}
			res, err := j.Score(context.Background(), in, memo)
			if !errors.Is(err, pipeline.ErrPermanent) {
				t.Fatalf("second score: %v, want permanent", err)
			}
			if wantCalls := map[bool]int{true: 1, false: 2}[tc.recorded]; f.Calls() != wantCalls || res.Cached != tc.recorded {
				t.Fatalf("second score: %d requests, cached %v; recorded=%v", f.Calls(), res.Cached, tc.recorded)
			}
		})
	}
}

func TestConcurrencyLimit(t *testing.T) {
	const limit, scores = 3, 12
	f := startFake(t, says("Score: 1"))
	gate := make(chan struct{})
	f.gate, f.arrived = gate, make(chan int, scores)
	cfg := testConfig(f)
	cfg.Concurrency = limit
	j := newJudge(t, cfg, nil)
	// Hold the first requests until `limit` are in flight, then let all go.
	go func() {
		for n := range f.arrived {
			if n == limit {
				close(gate)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, scores)
	for i := range scores {
		wg.Go(func() {
			_, err := j.Score(context.Background(), judge.Input{Prompt: fmt.Sprint(i), Completion: "c"}, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if f.MaxInFlight() != limit || f.Calls() != scores {
		t.Fatalf("max in flight = %d over %d requests; want exactly %d", f.MaxInFlight(), f.Calls(), limit)
	}
}

func TestMemoKeys(t *testing.T) {
	f := startFake(t, says("Score: 1"))
	memo := &memoTable{}
	cfg := testConfig(f)
	ctx := context.Background()
	score := func(cfg judge.Config, in judge.Input) judge.Result {
		t.Helper()
		res, err := newJudge(t, cfg, nil).Score(ctx, in, memo)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := score(cfg, in)
	if first.Cached || f.Calls() != 1 {
		t.Fatalf("first score cached=%v after %d requests", first.Cached, f.Calls())
	}
	// What cannot change the answer shares the record: another Judge, name,
	// key variable, timeouts, retries, concurrency, prices; metadata the
	// rubric does not use.
	same := cfg
	same.Name, same.Timeout, same.Retries, same.Backoff, same.Concurrency, same.PriceInPerMTok = "renamed", time.Minute, 9, time.Second, 1, 3
	withMeta := in
	withMeta.Metadata = map[string]any{"unused": 1}
	for _, c := range []struct {
		cfg judge.Config
		in  judge.Input
	}{{cfg, in}, {same, in}, {cfg, withMeta}} {
		if res := score(c.cfg, c.in); !res.Cached || res.Score != first.Score || res.Raw != first.Raw || res.TokensIn != first.TokensIn {
			t.Fatalf("replay = %+v, want the first result cached", res)
		}
	}
	if f.Calls() != 1 {
		t.Fatalf("%d requests, want 1", f.Calls())
	}
	// What can change the answer is a new key.
	otherRubric, otherModel, otherTemp, otherRange := cfg, cfg, cfg, cfg
	otherRubric.Rubric += " Be strict."
	otherModel.Model = "judge-model-2"
	otherTemp.Temperature = 1
	otherRange.Max = 10
	otherInput := in
	otherInput.Completion = "5"
	for i, c := range []struct {
		cfg judge.Config
		in  judge.Input
	}{{otherRubric, in}, {otherModel, in}, {otherTemp, in}, {otherRange, in}, {cfg, otherInput}} {
		if res := score(c.cfg, c.in); res.Cached || f.Calls() != 2+i {
			t.Fatalf("change %d: cached=%v after %d requests; want a new request", i, res.Cached, f.Calls())
		}
	}
}

func TestKeyLeavesOutWhatCannotChangeTheAnswer(t *testing.T) {
	base := judge.Config{BaseURL: "https://user:pw@api.example.com/v1/?token=t", Model: "m", Rubric: "Score: ?", APIKeyEnv: "OPENAI_API_KEY"}
	other := base
	other.Name, other.APIKeyEnv, other.Timeout, other.Retries, other.Concurrency, other.PriceOutPerMTok = "n", "OTHER_KEY", time.Second, 2, 3, 4
	a, _ := json.Marshal(base.Key())
	b, _ := json.Marshal(other.Key())
	if string(a) != string(b) {
		t.Fatalf("keys differ:\n%s\n%s", a, b)
	}
	want := `{"format":1,"base_url":"https://api.example.com/v1","model":"m","rubric":"Score: ?","min":0,"max":1,"temperature":0}`
	if string(a) != want {
		t.Fatalf("key = %s\nwant  %s", a, want)
	}
}

func TestTheKeyNeverLeaks(t *testing.T) {
	// A hostile server echoes the Authorization header everywhere it can.
	f := startFake(t, func(n int, r seenRequest) reply {
		echo := `{"error":{"message":"bad header ` + r.Auth + `"}}`
		switch n {
		case 1:
			return reply{Status: 500, Body: echo}
		case 2:
			return reply{Content: "Your key is " + r.Auth + ". Score: 1"}
		case 3:
			return reply{Status: 400, Body: echo}
		case 4:
			return reply{Status: 401, Body: echo}
		case 5:
			return reply{Refusal: "no, " + r.Auth}
		}
		return reply{Status: 503, Body: "down " + r.Auth}
	})
	var logs bytes.Buffer
	cfg := testConfig(f)
	cfg.Retries = 1
	j := newJudge(t, cfg, &judge.Options{Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	memo := &memoTable{}
	var seen []string
	for i := range 5 {
		res, err := j.Score(context.Background(), judge.Input{Prompt: fmt.Sprint(i)}, memo)
		seen = append(seen, fmt.Sprintf("%+v %v", res, err))
	}
	key, _ := json.Marshal(cfg.Key())
	cfgJSON, _ := json.Marshal(cfg)
	all := strings.Join(seen, "\n") + logs.String() + memo.dump() + string(key) + string(cfgJSON)
	if strings.Contains(all, testKey) {
		t.Fatalf("the API key leaked:\n%s", all)
	}
	for _, want := range []string{"bad header Bearer [redacted]", "Your key is Bearer [redacted]", "retrying", "no, Bearer [redacted]", "down Bearer [redacted]"} {
		if !strings.Contains(all, want) {
			t.Fatalf("want %q in what the judge showed:\n%s", want, all)
		}
	}
}

func TestAccountingIsExact(t *testing.T) {
	f := startFake(t, func(n int, _ seenRequest) reply {
		switch n {
		case 1:
			return reply{Content: "Score: 1", In: 1000, Out: 200}
		case 2:
			return reply{Content: "no idea", In: 3000, Out: 400}
		case 3:
			return reply{Status: 503}
		}
		return reply{Content: "Score: 0", In: 500, Out: 100}
	})
	cfg := testConfig(f)
	cfg.PriceInPerMTok, cfg.PriceOutPerMTok = 2.5, 10
	j := newJudge(t, cfg, nil)
	recordWaits(j)
	memo := &memoTable{}
	ctx := context.Background()
	var results []judge.Result
	for _, p := range []string{"a", "b", "c", "a"} {
		res, err := j.Score(ctx, judge.Input{Prompt: p}, memo)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	costs := []float64{results[0].Cost, results[1].Cost, results[2].Cost}
	if fmt.Sprint(costs) != fmt.Sprint([]float64{0.0045, 0.0115, 0.00225}) || costs[0] != 0.0045 || costs[1] != 0.0115 || costs[2] != 0.00225 {
		t.Fatalf("costs = %v, want [0.0045 0.0115 0.00225]", costs)
	}
	if !results[3].Cached || results[3].Cost != 0.0045 {
		t.Fatalf("replay = %+v, want the recorded cost, cached", results[3])
	}
	u := j.Usage()
	want := judge.Usage{Scores: 4, Cached: 1, Requests: 4, Retries: 1, TokensIn: 4500, TokensOut: 700, Cost: 0.01825,
		ByStatus: map[string]int{"ok": 3, "unparseable": 1}}
	if fmt.Sprintf("%+v", u) != fmt.Sprintf("%+v", want) || u.Cost != 0.01825 {
		t.Fatalf("usage = %+v\nwant    %+v", u, want)
	}
}

func TestMissingMetadataKeyFailsTheInput(t *testing.T) {
	f := startFake(t, says("Score: 1"))
	cfg := testConfig(f)
	cfg.Rubric = "Grade {{.Completion}} for {{.Metadata.task}}. Score: ?"
	j := newJudge(t, cfg, nil)
	_, err := j.Score(context.Background(), judge.Input{Completion: "x"}, &memoTable{})
	if !errors.Is(err, judge.ErrInput) || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), `no entry for key "task"`) || f.Calls() != 0 {
		t.Fatalf("err = %v after %d requests; want a permanent ErrInput naming the key, no request", err, f.Calls())
	}
	res, err := j.Score(context.Background(), judge.Input{Completion: "x", Metadata: map[string]any{"task": "math"}}, nil)
	if err != nil || res.Status != judge.StatusOK || f.Requests()[0].Body.Messages[0].Content != "Grade x for math. Score: ?" {
		t.Fatalf("with the key: %+v, %v", res, err)
	}
}

func TestNewRejectsBadConfigs(t *testing.T) {
	good := judge.Config{Name: "j", BaseURL: "http://127.0.0.1:1/v1", Model: "m", Rubric: rubric}
	for _, tc := range []struct {
		name string
		edit func(*judge.Config)
		says string
	}{
		{"unknown field", func(c *judge.Config) { c.Rubric = "Line one\n{{.Prompt}} {{.Respone}} Score:" },
			`rubric:2:14: executing "rubric" at <.Respone>: can't evaluate field Respone in type judge.Input; the fields are {{.Prompt}}, {{.Completion}}, {{.Answer}} and {{.Metadata.KEY}}`},
		{"syntax", func(c *judge.Config) { c.Rubric = "{{.Prompt} Score:" }, `rubric: template: rubric:1: bad character U+007D '}'`},
		{"empty rubric", func(c *judge.Config) { c.Rubric = " " }, "rubric is empty"},
		{"no score asked", func(c *judge.Config) { c.Rubric = "Is {{.Completion}} right?" }, "never asks for a score"},
		{"no model", func(c *judge.Config) { c.Model = "" }, "model is empty"},
		{"bad url", func(c *judge.Config) { c.BaseURL = "api.openai.com/v1" }, "is not an http(s) URL"},
		{"range", func(c *judge.Config) { c.Min, c.Max = 5, 1 }, "max (1) must be greater than min (5)"},
		{"pattern groups", func(c *judge.Config) { c.ScorePattern = `(a)(\d)` }, "needs exactly one capturing group"},
		{"pattern syntax", func(c *judge.Config) { c.ScorePattern = `(\d` }, "score_pattern: error parsing regexp"},
		{"negative", func(c *judge.Config) { c.Concurrency = -1 }, "cannot be negative"},
		{"key unset", func(c *judge.Config) { c.APIKeyEnv = "RLPIPE_TEST_UNSET" }, "$RLPIPE_TEST_UNSET is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := judge.New(cfg, &judge.Options{Getenv: env})
			if !errors.Is(err, judge.ErrConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v\nwant ErrConfig saying %s", err, tc.says)
			}
		})
	}
	if _, err := judge.New(good, &judge.Options{Getenv: env}); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	f := newFake(says("Score: 1"))
	base := f.URL
	f.Close() // nothing listens there any more
	j := newJudge(t, judge.Config{Name: "gone", BaseURL: base + "?api-version=2024-06-01", Model: "m", Rubric: rubric, Retries: 2, Backoff: time.Millisecond}, &judge.Options{})
	_, err := j.Score(context.Background(), in, nil)
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "gave up after 3 attempt(s)") ||
		strings.Contains(err.Error(), "api-version") || j.Usage().Requests != 3 {
		t.Fatalf("err = %v (%d requests); want ErrUnavailable after 3, the query not shown", err, j.Usage().Requests)
	}
}

func TestBaseURLQueryIsKept(t *testing.T) {
	f := startFake(t, says("Score: 1"))
	j := newJudge(t, judge.Config{BaseURL: f.URL + "/?api-version=2024-06-01", Model: "m", Rubric: rubric}, nil)
	if _, err := j.Score(context.Background(), in, nil); err != nil || f.Requests()[0].Query != "api-version=2024-06-01" || f.Requests()[0].Auth != "" {
		t.Fatalf("score: %v; request %+v; want the query kept and no Authorization without api_key_env", err, f.Requests())
	}
}
