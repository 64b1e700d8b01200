package cli

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingJudge is a paid judge API as far as rlpipe can tell: an
// OpenAI-style chat server on loopback that answers "Score: 1" and counts
// the requests it answered by their body. With killAt set, the request
// after that many answers kills the process calling it instead of being
// answered: a crash in the middle of the paid calls.
type countingJudge struct {
	URL string

	mu       sync.Mutex
	answered map[[32]byte]int
	total    int
	killAt   int
	victim   *exec.Cmd
	killed   bool
}

func startCountingJudge(t *testing.T) *countingJudge {
	t.Helper()
	j := &countingJudge{answered: map[[32]byte]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(j.serve)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	j.URL = "http://" + ln.Addr().String() + "/v1"
	return j
}

func (j *countingJudge) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	j.mu.Lock()
	if j.victim != nil && !j.killed && j.total == j.killAt {
		j.killed = true
		j.victim.Process.Kill()
		j.mu.Unlock()
		http.Error(w, "the caller is gone", http.StatusServiceUnavailable)
		return
	}
	j.answered[sha256.Sum256(body)]++
	j.total++
	j.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"grader","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Looks fine. Score: 1"}}],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}`)
}

// TestEvalPaysEachJudgeCallOnce kills `rlpipe eval` in the middle of its
// judge calls and runs it again: every distinct call is answered exactly
// once over both processes, because the eval stage's judges record their
// calls in the task's memo as the reward stage's do.
func TestEvalPaysEachJudgeCallOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the arithmetic loop")
	}
	h, cfg := smallArithRun(t)
	judge := startCountingJudge(t)
	spec := h.file("judged.yaml", fmt.Sprintf(`components:
  - name: correct
    expr: 'completion == answer ? 1.0 : 0.0'
  - name: style
    expr: 'judges.style.score'
    weight: 0.0
judges:
  - name: style
    base_url: %s
    model: grader
    rubric: "Rate the answer {{.Completion}} to {{.Prompt}}. Reply with Score: 0 or Score: 1."
    retries: -1
`, judge.URL))
	src := readFile(t, cfg)
	i := strings.Index(src, "spec: /")
	if i < 0 {
		t.Fatalf("no absolute reward spec in %s", cfg)
	}
	end := strings.IndexAny(src[i:], "}\n")
	judged := h.file("judged-pipeline.yaml", src[:i]+"spec: "+spec+src[i+end:])

	args, _ := json.Marshal([]string{"--store", h.store, "--log-level", "error", "eval", "-f", judged, "--checkpoints", "4"})
	cmd, stderr, done := startCLI(t, args)
	judge.mu.Lock()
	judge.victim, judge.killAt = cmd, 60
	judge.mu.Unlock()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("eval neither finished nor reached the judge")
	}
	judge.mu.Lock()
	killed, first := judge.killed, judge.total
	judge.mu.Unlock()
	if !killed {
		t.Fatalf("eval finished after %d judge calls without being killed: stderr %s", first, stderr)
	}

	var out evalRunOut
	h.json(&out, "eval", "-f", judged, "--checkpoints", "4")
	if len(out.Evals) != 1 || out.Evals[0].Problems != 50 || out.Evals[0].N != 4 {
		t.Fatalf("eval after the kill: %+v", out)
	}
	judge.mu.Lock()
	defer judge.mu.Unlock()
	twice := 0
	for _, n := range judge.answered {
		if n != 1 {
			twice++
		}
	}
	if twice > 0 || first != 60 || judge.total <= first || judge.total > 200 {
		t.Errorf("%d distinct calls answered %d times in all (%d before the kill); %d answered more than once", len(judge.answered), judge.total, first, twice)
	}
}
