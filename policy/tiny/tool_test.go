package tiny

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// The transcripts are Hermes text that policy/toolcall parses back to
// the agent environment's calls, and a training example trains the
// replies only, each ended by EOS, as PromptTokens renders an episode.
func TestToolTranscript(t *testing.T) {
	p := ToolProblem{A: 7, B: 5}
	read := "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"input.txt\"}}\n</tool_call>"
	submit := "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>"
	write := func(path, text string) string {
		return "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"" + path + "\", \"text\": \"" + text + "\"}}\n</tool_call>"
	}
	for _, tc := range []struct {
		b    ToolBehavior
		want []string
	}{
		{ToolSolve, []string{read, "7 5", "7+5=12\n" + write("answer.txt", "12") + "\n" + submit}},
		{ToolGuess, []string{write("answer.txt", "3") + "\n" + submit, "wrote 1 bytes to answer.txt"}},
		{ToolWrongFile, []string{read, "7 5", "7+5=12\n" + write("output.txt", "12") + "\n" + submit}},
		{ToolNoWrite, []string{read, "7 5", "7+5=12\n<tool_call>\n{\"name\": \"submit\", \"arguments\": {\"answer\": \"12\"}}\n</tool_call>"}},
	} {
		msgs := ToolTranscript(p, tc.b, 3)
		if len(msgs) != len(tc.want)+1 || msgs[0].Content != ToolInstruction {
			t.Fatalf("behaviour %d: %+v", tc.b, msgs)
		}
		for i, m := range msgs[1:] {
			if m.Text() != tc.want[i] {
				t.Errorf("behaviour %d, message %d: %q, want %q", tc.b, i+2, m.Text(), tc.want[i])
			}
			if m.Role == "assistant" {
				if _, calls, err := toolcall.Parse(m.Text()); err != nil || len(calls) != len(m.ToolCalls) {
					t.Errorf("behaviour %d, reply %q parses to %+v, %v", tc.b, m.Text(), calls, err)
				}
			}
		}
	}

	m, err := New(ToolConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	msgs := ToolTranscript(p, ToolSolve, 0)
	e, mask, err := m.ToolExample(msgs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := m.PromptTokens(policy.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if got := append(slices.Clone(e.Prompt), e.Completion...); !slices.Equal(got, all) || len(mask) != len(e.Completion) {
		t.Fatalf("example %v + %v (mask %d), want the rendering %v", e.Prompt, e.Completion, len(mask), all)
	}
	trained := 0
	for _, on := range mask {
		if on {
			trained++
		}
	}
	// The two replies and their EOS; the tool result "7 5" is given.
	reply2 := msgs[3].Text()
	if want := len(read) + 1 + len(reply2) + 1; trained != want || len(mask)-trained != 3 {
		t.Errorf("%d tokens trained and %d given, want %d and 3", trained, len(mask)-trained, want)
	}
	// The second turn's prompt and the stage's max_tokens (176) fit the
	// context, with room for a longer reply than the longest solved one.
	if prompt := 1 + len(all) - len(reply2) - 1; prompt+176 > ToolConfig().Context || len(reply2)+1 > 176 {
		t.Errorf("the second turn's prompt is %d tokens with BOS and its reply %d: max_tokens 176 does not fit the context %d", prompt, len(reply2)+1, ToolConfig().Context)
	}
	// A guess ends with a tool result, which is not trained: cut.
	if e, mask, err := m.ToolExample(ToolTranscript(p, ToolGuess, 3)); err != nil || !mask[len(mask)-1] || e.Completion[len(e.Completion)-1] != EOS {
		t.Errorf("a guess's example ends %v (mask %v), %v; want its reply's EOS, trained", e.Completion[len(e.Completion)-5:], mask[len(mask)-5:], err)
	}
	if _, _, err := m.ToolExample(msgs[:1]); err == nil {
		t.Error("an example without a reply was accepted")
	}
}

// The split holds out 26 fixed problems; behaviours are drawn 3:3:2:2.
func TestToolSplitAndBehaviors(t *testing.T) {
	held, train := ToolProblems(true), ToolProblems(false)
	if len(held) != 26 || len(train) != 74 || held[0] != (ToolProblem{0, 1}) {
		t.Errorf("%d held out (first %v), %d to train on; want 26 from {0 1}, 74", len(held), held[0], len(train))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var n [4]int
	for range 10000 {
		n[RandomToolBehavior(rng)]++
	}
	// Seeded; 3:3:2:2 of 10,000 within sampling noise.
	if want := [4]int{2956, 2977, 2041, 2026}; n != want {
		t.Errorf("behaviours drawn %v times of 10,000, want %v (3:3:2:2, seeded)", n, want)
	}
}

// A step of tool_sum pretraining is deterministic whatever the number of
// workers, and trains on the replies only: a batch of given tokens alone
// has no loss.
func TestToolPretrainDeterministic(t *testing.T) {
	cfg := DefaultToolPretrainConfig()
	cfg.Steps, cfg.BatchSize = 1, 2
	var sums [2][]byte
	for i, workers := range []int{1, 2} {
		cfg.Workers = workers
		m, err := Pretrain(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sums[i], err = m.Marshal(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(sums[0], sums[1]) {
		t.Error("tool_sum pretraining with 1 and 2 workers gave different weights")
	}
	loss := maskedNLL([][]bool{{false, false}})
	g := [][]float32{{9, 9}}
	if l, err := loss([][]float32{{-1, -2}}, nil, g); err != nil || l != 0 || g[0][0] != 0 {
		t.Errorf("loss of given tokens only: %g, %v, gradient %v; want 0 and none", l, err, g)
	}
}

// TestPretrainReproducesTool runs tiny-tool's full pretraining (a few
// minutes on two idle cores) and compares it with the shipped file. It
// runs when RLPIPE_SLOW=1.
func TestPretrainReproducesTool(t *testing.T) {
	if os.Getenv("RLPIPE_SLOW") == "" || testing.Short() {
		t.Skip("set RLPIPE_SLOW=1 to run tiny-tool's full pretraining")
	}
	m, err := Pretrain(context.Background(), DefaultToolPretrainConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got := hexSHA256(b); got != EmbeddedToolSHA256() {
		t.Errorf("pretraining gave sha256 %s, the shipped tiny-tool is %s", got, EmbeddedToolSHA256())
	}
}

// The shipped tiny-tool, pinned as tiny-rg is: its checksum, and its
// episodes played in memory (ToolPlay): greedily on all 26 held-out
// problems, at temperature 1 on the first 5 (4 each; the test runs under
// -race, and examples/tools-demo measures the whole split in sandboxes).
const (
	toolSHA256    = "7be16681aa74c0b4d98766720d7316bc07643c1aa1d221627cbc4b411095cb53"
	toolGreedy    = 26
	toolT1Solved  = 7
	toolT1Read    = 14
	toolT1Samples = 4
)

// TestEmbeddedTool pins the shipped tiny-tool: its file's checksum,
// config and version, its first call, and its held-out episodes.
func TestEmbeddedTool(t *testing.T) {
	m := shippedBase(t, EmbeddedTool, EmbeddedToolSHA256, toolSHA256, ToolConfig())
	ctx := context.Background()
	p := ToolProblem{7, 5}
	out, err := m.Generate(ctx, nil, []policy.Request{{Messages: ToolTranscript(p, ToolSolve, 0)[:1]}}, policy.Sampling{})
	if err != nil {
		t.Fatal(err)
	}
	if s, want := out[0][0], ToolTranscript(p, ToolSolve, 0)[1].Text(); s.Text != want || s.FinishReason != policy.FinishStop {
		t.Errorf("first reply %q (%s), want the read_file call %q", s.Text, s.FinishReason, want)
	}
	greedy, err := m.ToolPlay(ctx, nil, ToolProblems(true), 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if solved := int(ToolSuccess(greedy)*26 + 0.5); solved != toolGreedy {
		t.Errorf("%d of 26 held-out episodes solved greedily, want %d", solved, toolGreedy)
	}
	held := ToolProblems(true)[:5]
	sampled, err := m.ToolPlay(ctx, nil, held, toolT1Samples, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	solved, read := 0, 0
	for _, o := range sampled {
		for _, e := range o {
			if e.Solved {
				solved++
			}
			if e.Read {
				read++
			}
		}
	}
	t.Logf("temperature 1: %d of %d episodes solved, %d read input.txt", solved, 5*toolT1Samples, read)
	if solved != toolT1Solved || read != toolT1Read {
		t.Errorf("temperature 1: %d solved and %d read of %d, want %d and %d (seeded)", solved, read, 5*toolT1Samples, toolT1Solved, toolT1Read)
	}
}
