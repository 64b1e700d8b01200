package main

// The STAND-IN: a scripted agent and a rule-based judge served over the
// OpenAI API on loopback, so that the example runs here without a model and
// still speaks HTTP through the same clients as against vLLM.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/internal/loopback"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/server"
)

// standinModel is the stand-in policy's model name, and so the
// trajectories' policy_version.
const standinModel = "standin-agent"

// script is what the stand-in replies to one task, turn by turn; the last
// reply, without a code block, is the final answer.
type script struct {
	right []string
	wrong []string // sample 1's replies: a wrong command, a curt answer
	// dawdle: sample 3 lists files forever and is truncated by --max-turns.
	dawdle bool
}

var scripts = map[string]script{
	"fix-mean": {
		right: []string{
			"Let me run the tests first.\n```bash\nbash tests/test_mean.sh\n```",
			"mean divides by n + 1 instead of n.\n```bash\nsed -i 's|sum / (n + 1)|sum / n|' lib/mean.sh && bash tests/test_mean.sh\n```",
			"Fixed lib/mean.sh: it divided by n + 1 instead of n; tests/test_mean.sh passes now.",
		},
		wrong: []string{
			"Let me run the tests first.\n```bash\nbash tests/test_mean.sh\n```",
			"```bash\nsed -i 's|sum / (n + 1)|sum / (n - 1)|' lib/mean.sh\n```",
			"Done.",
		},
	},
	"count-rows": {
		right: []string{
			"```bash\nhead -n 3 data.csv\n```",
			"```bash\ntail -n +2 data.csv | wc -l > report.txt && cat report.txt\n```",
			"report.txt holds 6, the rows of data.csv without its header; I checked it with cat.",
		},
		wrong: []string{
			"```bash\nwc -l < data.csv > report.txt\n```",
			"Done.",
		},
		dawdle: true,
	},
	"isolated-note": {
		right: []string{
			"```bash\nls\n```",
			"```bash\nmkdir -p notes && echo sandbox > notes/isolated.txt && cat notes/isolated.txt\n```",
			"Wrote notes/isolated.txt and checked its content.",
		},
		wrong: []string{
			"```bash\necho sandbox > isolated.txt\n```",
			"Done.",
		},
	},
}

// standin is the scripted agent: a deterministic policy.Policy that finds
// the task by its instruction and the episode's sample index by the request
// seed, which the runner derives from the run seed, the episode id and the
// sample (policy.RequestSeed of "id#sample/turn").
type standin struct {
	seed  int64
	tasks []task
}

var (
	_ policy.Policy        = (*standin)(nil)
	_ policy.AdapterLoader = (*standin)(nil)
)

// LoadAdapter accepts an adapter and uses nothing of it: a script does
// not change with training, and the example's train stage is a stand-in
// too. It answers the loop's load as a model server would, so that the
// run's next iteration goes on (its rows' policy_version names the
// adapter; the replies are the script's).
func (s *standin) LoadAdapter(context.Context, string, string) error { return nil }

// UnloadAdapter has nothing to drop.
func (s *standin) UnloadAdapter(context.Context, string) error { return nil }

func (s *standin) Generate(ctx context.Context, reqs []policy.Request, smp policy.Sampling) ([][]policy.Sample, error) {
	if err := policy.Validate(reqs, smp); err != nil {
		return nil, err
	}
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text := s.reply(r)
		for j := range smp.Samples() {
			sample := policy.Sample{RequestID: r.ID, Index: j, Text: text,
				FinishReason: policy.FinishStop, PolicyVersion: standinModel, Status: policy.StatusOK}
			// Its tokens, as a model server returns them: the reply's
			// and, asked for, the prompt's; logprobs of 0, for a script
			// that replies with certainty.
			sample.TokenIDs = append(standinTokens(text), standinEOT)
			sample.PromptTokens = len(standinPrompt(r))
			if smp.Logprobs {
				sample.Logprobs = make([]float32, len(sample.TokenIDs))
			}
			if smp.PromptLogprobs {
				ids := standinPrompt(r)
				sample.Prompt = &policy.PromptLogprobs{TokenIDs: ids, Logprobs: make([]float32, len(ids))}
			}
			out[i] = append(out[i], sample)
		}
	}
	return out, nil
}

// The stand-in's tokens: a byte-level chat template of its own. Token
// b+3 is byte b; standinEOT (2) ends every message, the replies included.
// A conversation is, per message, "<|role|>\n", its content and EOT, then
// "<|assistant|>\n" to ask for the reply; so each turn's prompt begins
// with the tokens of the turns before it, replies included, and an
// episode's token sequence is exact, as with a real model's template that
// does not rewrite earlier turns.
const standinEOT int32 = 2

func standinTokens(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i]) + 3
	}
	return ids
}

func standinPrompt(r policy.Request) []int32 {
	if len(r.Messages) == 0 {
		return standinTokens(r.Prompt)
	}
	var out []int32
	for _, m := range r.Messages {
		out = append(out, standinTokens("<|"+m.Role+"|>\n"+m.Content)...)
		out = append(out, standinEOT)
	}
	return append(out, standinTokens("<|assistant|>\n")...)
}

func (s *standin) reply(r policy.Request) string {
	if len(r.Messages) == 0 {
		return "I only play agent episodes."
	}
	turn := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			turn++
		}
	}
	for _, t := range s.tasks {
		if !strings.HasPrefix(r.Messages[0].Content, strings.TrimRight(t.Instruction, "\n")) {
			continue
		}
		sc, ok := scripts[t.ID]
		if !ok {
			break
		}
		replies := sc.right
		sample := s.sample(t.ID, turn, r.Seed)
		if sample < 0 {
			// Not this process's seeds (rlpipe run derives each task
			// call's): the request's seed picks the turn's script.
			sample = int(uint64(r.Seed) % 4)
		}
		switch {
		case sample == 1:
			replies = sc.wrong
		case sample == 3 && sc.dawdle:
			return "Let me look around once more.\n```bash\nls\n```"
		}
		if turn < len(replies) {
			return replies[turn]
		}
		return replies[len(replies)-1]
	}
	return "I do not know this task; the stand-in only plays the tasks of tasks.jsonl."
}

// sample finds the sample index whose request seed is seed, -1 if none.
func (s *standin) sample(id string, turn int, seed int64) int {
	for i := range 1024 {
		if policy.RequestSeed(s.seed, id+"#"+strconv.Itoa(i)+"/"+strconv.Itoa(turn)) == seed {
			return i
		}
	}
	return -1
}

// judgeRubric asks for a grade of the agent's final message; the stand-in
// judge finds it between <final> tags.
const judgeRubric = `You grade the final message of a coding agent.

Task: {{.Prompt}}

Final message:
<final>
{{.Completion}}
</final>

Does the final message say what the agent did and how it checked the result?
Reply with "Score: 1" (yes), "Score: 0.5" (it only says it is done) or "Score: 0" (no message).`

var reFinal = regexp.MustCompile(`(?s)<final>\n?(.*?)\n?</final>`)

// standinJudge is a hand-written POST /v1/chat/completions handler: a rule,
// not a model. A final message that mentions a check scores 1, any other
// non-empty one 0.5, none 0.
func standinJudge(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []policy.Message `json:"messages"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"POST a chat completion request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	final := ""
	if m := reFinal.FindStringSubmatch(body.Messages[len(body.Messages)-1].Content); m != nil {
		final = strings.ToLower(strings.TrimSpace(m[1]))
	}
	verdict := "STAND-IN judge (a rule, not a model): no final message.\nScore: 0"
	switch {
	case strings.Contains(final, "check") || strings.Contains(final, "pass"):
		verdict = "STAND-IN judge (a rule, not a model): the message names a check.\nScore: 1"
	case final != "":
		verdict = "STAND-IN judge (a rule, not a model): the message names no check.\nScore: 0.5"
	}
	b, err := json.Marshal(map[string]any{
		"object":  "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": verdict}}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0},
	})
	if err != nil {
		http.Error(w, "stand-in judge: encode the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// serveStandin serves the stand-in policy (under /v1) and the stand-in
// judge (under /judge/v1) on addr, a loopback address ("" is
// 127.0.0.1:0), until stop is called, and returns the base URL.
func serveStandin(p policy.Policy, addr string) (base string, stop func() error, err error) {
	srv, err := server.New(p, &server.Options{Model: standinModel})
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/judge/v1/chat/completions", standinJudge)
	mux.Handle("/", srv)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := loopback.Listen(context.Background(), addr, false, func(a string) error {
		return fmt.Errorf("the stand-in serves on loopback only, not %s: use 127.0.0.1:PORT", a)
	})
	if err != nil {
		return "", nil, fmt.Errorf("listen for the stand-in server: %w", err)
	}
	hs := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	stop = func() error {
		err := hs.Shutdown(context.Background())
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		return err
	}
	return "http://" + l.Addr().String(), stop, nil
}
