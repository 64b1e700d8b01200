package external_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/rollouts"
)

// reloadServer is a small hand-written vLLM-like server: completions of
// three tokens with logprobs, and the dev endpoints that reload weights,
// which answer 404 (vLLM without VLLM_SERVER_DEV_MODE=1) until dev is set.
type reloadServer struct {
	*httptest.Server
	mu      sync.Mutex
	dev     bool
	reloads []string // weights_path of each accepted reload
}

func newReloadServer(t *testing.T) *reloadServer {
	s := &reloadServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *reloadServer) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	dev := s.dev
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/completions":
		n := int(body["n"].(float64))
		choices := make([]any, n)
		for j := range choices {
			choices[j] = map[string]any{"index": j, "text": "4", "finish_reason": "stop", "token_ids": []int{10, 2},
				"logprobs": map[string]any{"tokens": []string{"token_id:10", "token_id:2"}, "token_logprobs": []float64{-0.5, -0.1}}}
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "text_completion", "model": body["model"], "choices": choices})
	case r.URL.Path == "/v1/models":
		json.NewEncoder(w).Encode(map[string]any{"data": []any{map[string]any{"id": "tiny", "root": "/models/tiny", "parent": nil}}})
	case !dev:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	case r.URL.Path == "/collective_rpc":
		kw, _ := body["kwargs"].(map[string]any)
		s.mu.Lock()
		s.reloads = append(s.reloads, fmt.Sprint(kw["weights_path"]))
		s.mu.Unlock()
		fmt.Fprint(w, `{"results":[null]}`)
	case r.URL.Path == "/reset_prefix_cache":
		fmt.Fprint(w, `{"success":true}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// A run whose trainer writes full weights (lora: none) and whose server
// refuses to reload them: iteration 2's generate task fails at once,
// naming the server's message and the fix, with iteration 1 committed;
// once the server takes reloads, the same run resumes at iteration 2,
// whose rows name the weights they were sampled from.
func TestRefusedWeightsReloadResumesAfterTheFix(t *testing.T) {
	srv := newReloadServer(t)
	c, err := openai.New(&openai.Options{Endpoints: []string{srv.URL}, Model: "tiny", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rollouts.Task(rollouts.Options{Policy: c, Identity: "tiny", AdapterRoot: t.TempDir(),
		Sampling: policy.Sampling{N: 2, Temperature: 1, MaxTokens: 5, Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	s := standin.Stages(standin.Options{})
	stages := pipeline.Stages{Sample: s.Sample, Generate: gen, Reward: s.Reward, Train: trainTask(t, "weights", nil)}
	st := standintest.NewStore(t, 12)

	first := openRun(t, st, "w", 3, nil)
	_, err = first.Loop(context.Background(), loopConfig(2), stages)
	first.Close()
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Task != "generate" || te.Attempts != 1 || !errors.Is(err, openai.ErrWeightsRefused) {
		t.Fatalf("err = %v, want the generate task refused once (ErrWeightsRefused)", err)
	}
	for _, want := range []string{"POST " + srv.URL + `/collective_rpc: 404 Not Found: {"detail":"Not Found"}`,
		"restart vLLM with VLLM_SERVER_DEV_MODE=1 in its environment"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	srv.mu.Lock()
	srv.dev = true // the fix: a server with the reload endpoint
	srv.mu.Unlock()
	state := loopOK(t, openRun(t, st, "w", 3, nil), 2, stages)
	if state.Iteration != 2 {
		t.Fatalf("resumed run ends at iteration %d, want 2", state.Iteration)
	}
	if len(srv.reloads) != 1 || !strings.Contains(srv.reloads[0], "weights-") {
		t.Errorf("reloads %v, want one from the copy of iteration 1's weights", srv.reloads)
	}
	rows := standintest.ReadRows(t, st, "runs-w", runs.IterationPath(2, runs.TrajectoriesFile), tables.Trajectories)
	want := "tiny+" + strings.TrimSuffix(srv.reloads[0][strings.LastIndex(srv.reloads[0], "weights-"):], "/")
	for _, r := range rows {
		if r.PolicyVersion != want || r.Status != tables.StatusOK {
			t.Fatalf("iteration 2 row %s/%d: version %q status %q, want %q ok", r.PromptID, r.SampleIndex, r.PolicyVersion, r.Status, want)
		}
	}
}
