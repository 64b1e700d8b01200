// Package chain holds the test of the multi-turn chain pipeline
// (pipeline.yaml) with its episodes sampled by a real vLLM.
package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/examples/exampletest"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// iterations is how many iterations of pipeline.yaml the test runs.
const iterations = 5

// pipeline.yaml as shipped, cut to a few iterations without evaluation,
// its episodes sampled by vLLM serving the exported tiny-chain on a free
// loopback port, each iteration from the previous one's adapter
// hot-loaded into vLLM. Every committed episode must have an exact token
// sequence whose given tokens are the prompt token ids vLLM returned, a
// trainable mask over exactly its replies, and replies whose logprobs are
// the embedded model's on the same ids. Skipped without a venv with vLLM.
func TestChainEpisodesWithVLLM(t *testing.T) {
	py := exampletest.VLLMPython(t, "starts vLLM and runs episodes for a few iterations")
	model := vllmtest.Export(t, "tiny-chain")
	t0 := time.Now()
	srv := vllmtest.Start(t, vllmserver.Options{Python: py, Model: model, Name: "tiny-chain"})
	t.Logf("vLLM up in %v", time.Since(t0).Round(time.Second))

	// No evaluation: it would play 8,000 episodes.
	src := exampletest.Config(t, "pipeline.yaml", map[string]string{
		"iterations: 100": fmt.Sprintf("iterations: %d", iterations),
		"policy: {kind: embedded, model: tiny-chain}": fmt.Sprintf("policy: {kind: openai, model: tiny-chain, endpoints: ['%s'], concurrency: 8}", srv.URL()),
	})
	eval, envs := strings.Index(src, "eval:"), strings.Index(src, "environments:")
	if eval < 0 || envs < eval {
		t.Fatal("pipeline.yaml no longer has its eval section before environments; update this test")
	}
	src = src[:eval] + src[envs:]
	e := exampletest.New(t, srv.LogTail)
	cfg := e.Write("pipeline.yaml", src)
	e.Write("reward.yaml", exampletest.Config(t, "reward.yaml", nil))
	e.Rlpipe("init-store")
	e.Rlpipe("dataset", "arith", "main")
	t1 := time.Now()
	e.Rlpipe("run", "-f", cfg, "--no-report")
	took := time.Since(t1)

	var st struct {
		Iterations []struct {
			Iteration int    `json:"iteration"`
			Commit    string `json:"commit"`
		} `json:"iterations"`
	}
	e.JSON(&st, "status", "chain")
	committed := 0
	for _, it := range st.Iterations {
		if it.Iteration >= 1 && it.Commit != "" {
			committed++
		}
	}

	s := e.Open()
	m, err := tiny.EmbeddedChain()
	if err != nil {
		t.Fatal(err)
	}
	episodes, solved, turns := 0, 0, 0
	worstBase, worstAdapter := 0.0, 0.0
	for it := 1; it <= iterations; it++ {
		rows := standintest.ReadRows(t, s, "runs-chain", runs.IterationPath(it, runs.TrajectoriesFile), tables.Trajectories)
		if len(rows) != 16*8 {
			t.Fatalf("iteration %d: %d episodes, want 16 prompts × 8", it, len(rows))
		}
		// Iteration 1 samples from the base; each later one from the
		// adapter the one before it trained, loaded into vLLM, and scored
		// here with the same adapter.
		var a *tiny.Adapter
		if it > 1 {
			if a, err = m.LoadAdapter(exampletest.Adapter(t, s, "runs-chain", it-1)); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range rows {
			name := fmt.Sprintf("iteration %d episode %s #%d", it, r.PromptID, r.SampleIndex)
			if r.Status != tables.StatusOK {
				t.Errorf("%s: status %s (%s)", name, r.Status, deref(r.Error))
				continue
			}
			if (it == 1 && r.PolicyVersion != "tiny-chain") || (it > 1 && !strings.HasPrefix(r.PolicyVersion, "tiny-chain+adapter-")) {
				t.Errorf("%s: sampled by %q", name, r.PolicyVersion)
			}
			checkSequence(t, m, name, r)
			if gap := logprobGap(t, m, a, name, r); a == nil {
				worstBase = max(worstBase, gap)
			} else {
				worstAdapter = max(worstAdapter, gap)
			}
			episodes++
			turns += strings.Count(turnRoles(r.Turns), "assistant")
			if r.EnvOutcome != nil && strings.Contains(*r.EnvOutcome, `"solved":true`) {
				solved++
			}
		}
		if it == iterations {
			replayPrompts(t, srv.URL(), rows)
		}
	}
	t.Logf("%d iterations committed in %v: %d episodes (%d policy turns, %d solved), sampled by vLLM; its logprobs of the replies and the embedded model's on the same ids differ by at most %.2g (base), %.2g (adapters)",
		committed, took.Round(time.Second), episodes, turns, solved, worstBase, worstAdapter)
	if committed != iterations {
		t.Errorf("%d iterations committed, want %d: %+v", committed, iterations, st.Iterations)
	}
	if worst := max(worstBase, worstAdapter); worst > 1e-4 {
		t.Errorf("vLLM's and the embedded model's logprobs differ by %.3g, want ≤ 1e-4", worst)
	}
}

// checkSequence checks that an episode's sequence is BOS and the template's
// rendering of its turns — what the embedded model's PromptTokens give for
// each turn's transcript — with each reply's token ids where its turn is,
// and that the mask covers exactly the replies.
func checkSequence(t *testing.T, m *tiny.Model, name string, r tables.Trajectory) {
	t.Helper()
	if r.Sequence == nil || len(r.Trainable) != len(r.Sequence) {
		t.Errorf("%s: no exact sequence (%d ids, %d mask)", name, len(r.Sequence), len(r.Trainable))
		return
	}
	want, mask := []int32{tiny.BOS}, []int32{0}
	var msgs []policy.Message
	replies := 0
	for _, turn := range r.Turns {
		if turn.Role != "assistant" {
			msgs = append(msgs, policy.Message{Role: turn.Role, Content: turn.Content})
			continue
		}
		ids, err := m.PromptTokens(policy.Request{Messages: msgs})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		given := ids[len(want)-1:] // what this turn's prompt adds
		want, mask = append(want, given...), append(mask, make([]int32, len(given))...)
		reply, err := m.Tokenize(turn.Content)
		if err != nil {
			t.Fatalf("%s: reply %q: %v", name, turn.Content, err)
		}
		n := len(reply)
		if replies+n > len(r.TokenIDs) || !slices.Equal(r.TokenIDs[replies:replies+n], reply) {
			t.Errorf("%s: reply %q is not token ids %v", name, turn.Content, r.TokenIDs[replies:])
			return
		}
		if replies+n < len(r.TokenIDs) && r.TokenIDs[replies+n] == tiny.EOS {
			n++ // the reply's EOS; a reply cut at max_tokens has none, and ends the episode
		}
		want = append(want, r.TokenIDs[replies:replies+n]...)
		for range n {
			mask = append(mask, 1)
		}
		replies += n
		msgs = append(msgs, policy.Message{Role: "assistant", Content: turn.Content})
	}
	if replies != len(r.TokenIDs) || !slices.Equal(r.Sequence, want) || !slices.Equal(r.Trainable, mask) {
		t.Errorf("%s:\nsequence %v\n    mask %v\nwant     %v\n    mask %v", name, r.Sequence, r.Trainable, want, mask)
	}
}

// logprobGap scores the episode's sequence with the embedded model (and
// adapter a) and returns the largest gap between its logprobs of the
// trainable tokens and those vLLM returned with them. Score prepends BOS,
// so the sequence goes in without its own.
func logprobGap(t *testing.T, m *tiny.Model, a *tiny.Adapter, name string, r tables.Trajectory) float64 {
	t.Helper()
	first := slices.Index(r.Trainable, 1)
	if first < 1 || len(r.Logprobs) != len(r.TokenIDs) {
		t.Errorf("%s: first trainable token at %d, %d logprobs for %d tokens", name, first, len(r.Logprobs), len(r.TokenIDs))
		return 0
	}
	got, _, err := m.Score(context.Background(), a, []tiny.Example{{Prompt: r.Sequence[1:first], Completion: r.Sequence[first:]}})
	if err != nil {
		t.Fatalf("%s: score: %v", name, err)
	}
	worst, k := 0.0, 0
	for i := first; i < len(r.Sequence); i++ {
		if r.Trainable[i] == 1 {
			worst = max(worst, math.Abs(float64(got[0][i-first]-r.Logprobs[k])))
			k++
		}
	}
	return worst
}

// replayPrompts asks vLLM again for each turn of the episodes, one token
// with return_token_ids, and checks that the prompt token ids it returns
// are the episode's sequence up to that turn's reply: the given tokens of
// the sequence are vLLM's own, not a re-tokenization. The adapter does not
// change the prompt's tokens, so the base model is asked.
func replayPrompts(t *testing.T, url string, rows []tables.Trajectory) {
	t.Helper()
	checked := 0
	for _, r := range rows {
		if r.Sequence == nil {
			continue
		}
		var msgs []policy.Message
		at := 0 // the reply's start in the sequence
		replies := 0
		for _, turn := range r.Turns {
			if turn.Role != "assistant" {
				msgs = append(msgs, policy.Message{Role: turn.Role, Content: turn.Content})
				continue
			}
			body, _ := json.Marshal(map[string]any{"model": "tiny-chain", "messages": msgs, "max_tokens": 1, "return_token_ids": true})
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				PromptTokenIDs []int32 `json:"prompt_token_ids"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("replay %s #%d: %s: %v", r.PromptID, r.SampleIndex, resp.Status, err)
			}
			for at < len(r.Trainable) && r.Trainable[at] == 0 {
				at++
			}
			if !slices.Equal(out.PromptTokenIDs, r.Sequence[:at]) {
				t.Errorf("%s #%d turn %d: vLLM's prompt token ids %v, the sequence's %v", r.PromptID, r.SampleIndex, replies, out.PromptTokenIDs, r.Sequence[:at])
			}
			for at < len(r.Trainable) && r.Trainable[at] == 1 {
				at++
			}
			replies++
			checked++
			msgs = append(msgs, policy.Message{Role: "assistant", Content: turn.Content})
		}
	}
	if checked == 0 {
		t.Error("no turn replayed")
	}
}

func turnRoles(ts []tables.Turn) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Role + " ")
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
