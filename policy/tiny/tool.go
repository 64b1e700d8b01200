package tiny

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// ModelTinyTool names the shipped base pretrained on transcripts of a
// tiny tool-using task in the Hermes <tool_call> format
// (weights/tool.safetensors, EmbeddedTool).
const ModelTinyTool = "tiny-tool"

// FamilyToolSum is PretrainConfig.Family for ToolExample's episodes of
// the tool task (ToolTranscript), trained on the replies only.
const FamilyToolSum = "tool_sum"

// ToolConfig is tiny-tool's configuration: narrower than tiny-chain (d 48,
// two heads of 24, MLP 128, two layers: every episode is some 250 tokens
// to train on), context 448 (a third turn's prompt and a reply's
// max_tokens of 176, for an episode given a third reply), and a vocabulary of every printable
// ASCII character and the newline: Hermes tool calls are lines of JSON,
// and what a tool answers (an error, a file) may hold any character, which
// a narrower vocabulary could not read, turning the episode invalid
// instead of teaching the model from it.
func ToolConfig() Config {
	c := DefaultConfig()
	c.Name, c.Dim, c.Heads, c.HeadDim, c.Layers, c.Hidden, c.Context = ModelTinyTool, 48, 2, 24, 2, 128, 448
	var v strings.Builder
	for ch := byte(0x20); ch <= 0x7e; ch++ {
		v.WriteByte(ch)
	}
	c.Vocab = v.String() + "\n"
	return c
}

// DefaultToolPretrainConfig reproduces weights/tool.safetensors byte for
// byte (see the package documentation for how its steps were chosen).
func DefaultToolPretrainConfig() PretrainConfig {
	c := DefaultPretrainConfig()
	c.Model, c.Family, c.Steps, c.BatchSize, c.Warmup = ToolConfig(), FamilyToolSum, 1750, 16, 30
	return c
}

// The tool task's fixed texts: the instruction and the files. The tools
// are environments/agent's (read_file {path}, write_file {path, text},
// submit {answer?}), as its rl_options tools: true offers them.
const (
	ToolInstruction = "Sum input.txt into answer.txt."
	ToolInputFile   = "input.txt"
	ToolAnswerFile  = "answer.txt"
	// ToolOtherFile is where the ToolWrongFile behaviour writes the sum.
	ToolOtherFile = "output.txt"
)

// ToolProblem is one task: input.txt holds "A B", two one-digit numbers;
// answer.txt must hold their sum.
type ToolProblem struct{ A, B int }

// Input is input.txt's content: "7 5".
func (p ToolProblem) Input() string { return strconv.Itoa(p.A) + " " + strconv.Itoa(p.B) }

// Answer is the sum in decimal.
func (p ToolProblem) Answer() string { return strconv.Itoa(p.A + p.B) }

// HeldOut reports whether the problem is in the held-out split of the
// RL run (examples/tools-demo trains on the others and evaluates on
// these): the 32-bit FNV-1a hash of its input ("7 5") is divisible by 4,
// 26 of the 100 problems.
func (p ToolProblem) HeldOut() bool {
	h := fnv.New32a()
	h.Write([]byte(p.Input()))
	return h.Sum32()%4 == 0
}

// ToolProblems returns the 100 problems in order, A then B, those in the
// held-out split (heldOut true) or the others.
func ToolProblems(heldOut bool) []ToolProblem {
	var out []ToolProblem
	for a := range 10 {
		for b := range 10 {
			if p := (ToolProblem{a, b}); p.HeldOut() == heldOut {
				out = append(out, p)
			}
		}
	}
	return out
}

// ToolBehavior is how a pretraining transcript goes: the base imitates
// an agent that solves the task a third of the time and otherwise makes
// one of an agent's usual mistakes, so that GRPO has a behaviour to
// choose (see the package documentation).
type ToolBehavior int

const (
	// ToolSolve reads input.txt, works the sum out ("7+5=12"), writes it
	// to answer.txt and submits.
	ToolSolve ToolBehavior = iota
	// ToolGuess writes a guess to answer.txt without reading input.txt,
	// and submits.
	ToolGuess
	// ToolWrongFile reads, works the sum out, writes it to output.txt and
	// submits.
	ToolWrongFile
	// ToolNoWrite reads, works the sum out and submits it as submit's
	// answer, writing no file.
	ToolNoWrite
)

// toolBehaviorWeights are the odds of the behaviours in pretraining, in
// ToolBehavior order: 3 solve, 3 guess, 2 wrong file, 2 no write.
var toolBehaviorWeights = [...]int{3, 3, 2, 2}

// RandomToolBehavior draws a behaviour with toolBehaviorWeights' odds.
func RandomToolBehavior(rng *rand.Rand) ToolBehavior {
	total := 0
	for _, w := range toolBehaviorWeights {
		total += w
	}
	r := rng.IntN(total)
	for b, w := range toolBehaviorWeights {
		if r < w {
			return ToolBehavior(b)
		}
		r -= w
	}
	panic("unreachable")
}

// toolCall is a call whose arguments are the keys and string values of
// kv in order, spaced as Python's json.dumps spaces them (as Hermes
// templates show arguments): {"path": "answer.txt", "text": "12"}. The
// task's keys and values are plain ASCII, which Go quotes as JSON does.
func toolCall(name string, kv ...string) toolcall.Call {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(kv[i]) + ": " + strconv.Quote(kv[i+1]))
	}
	b.WriteByte('}')
	return toolcall.Call{Name: name, Arguments: b.String()}
}

// ToolTranscript is an episode of p with behaviour b as chat messages, as
// environments/agent plays it with tools: the instruction; the replies
// with their calls; each call's result as a tool message (read_file's is
// the file, write_file's "wrote N bytes to PATH"). submit ends the
// episode, so the last reply has no result. guess is ToolGuess's answer.
func ToolTranscript(p ToolProblem, b ToolBehavior, guess int) []policy.Message {
	read := toolCall("read_file", "path", ToolInputFile)
	write := func(path, text string) toolcall.Call {
		return toolCall("write_file", "path", path, "text", text)
	}
	submit := toolCall("submit")
	wrote := func(path, text string) policy.Message {
		return policy.Message{Role: "tool", Content: fmt.Sprintf("wrote %d bytes to %s", len(text), path)}
	}
	msgs := []policy.Message{{Role: "user", Content: ToolInstruction}}
	if b == ToolGuess {
		g := strconv.Itoa(guess)
		return append(msgs,
			policy.Message{Role: "assistant", ToolCalls: []toolcall.Call{write(ToolAnswerFile, g), submit}},
			wrote(ToolAnswerFile, g))
	}
	worked := strconv.Itoa(p.A) + "+" + strconv.Itoa(p.B) + "=" + p.Answer()
	msgs = append(msgs,
		policy.Message{Role: "assistant", ToolCalls: []toolcall.Call{read}},
		policy.Message{Role: "tool", Content: p.Input()})
	var calls []toolcall.Call
	switch b {
	case ToolSolve:
		calls = []toolcall.Call{write(ToolAnswerFile, p.Answer()), submit}
	case ToolWrongFile:
		calls = []toolcall.Call{write(ToolOtherFile, p.Answer()), submit}
	case ToolNoWrite:
		s := toolCall("submit", "answer", p.Answer())
		calls = []toolcall.Call{s}
	}
	return append(msgs, policy.Message{Role: "assistant", Content: worked, ToolCalls: calls})
}

// ToolTrainingExample draws a pretraining episode: any of the 100
// problems (the base knows its one-digit sums, as any language model
// does; the held-out split is held out of the RL run, which trains on
// the others), a behaviour (RandomToolBehavior) and a guess uniform in
// 0..18.
func ToolTrainingExample(rng *rand.Rand) []policy.Message {
	p := ToolProblem{rng.IntN(10), rng.IntN(10)}
	b := RandomToolBehavior(rng)
	return ToolTranscript(p, b, rng.IntN(19))
}

// ToolExample returns a transcript as a training example and its mask: the
// prompt is the instruction; the completion is the rest as the model
// reads it in an episode (PromptTokens' rendering: each message's Text,
// an assistant message ended by EOS), and mask[i] is true for the
// replies' tokens, false for the tool results', which the policy is
// given, not trained on. A transcript that ends with a tool message
// (ToolGuess's) is cut after its last reply.
func (m *Model) ToolExample(msgs []policy.Message) (Example, []bool, error) {
	for len(msgs) > 0 && msgs[len(msgs)-1].Role != "assistant" {
		msgs = msgs[:len(msgs)-1]
	}
	if len(msgs) < 2 {
		return Example{}, nil, fmt.Errorf("tool example: no reply to train on")
	}
	prompt, err := m.Tokenize(msgs[0].Text())
	if err != nil {
		return Example{}, nil, fmt.Errorf("tool example: instruction: %w", err)
	}
	var comp []int32
	var mask []bool
	for i, msg := range msgs[1:] {
		ids, err := m.Tokenize(msg.Text())
		if err != nil {
			return Example{}, nil, fmt.Errorf("tool example: message %d (%s): %w", i+2, msg.Role, err)
		}
		reply := msg.Role == "assistant"
		if reply {
			ids = append(ids, EOS)
		}
		comp = append(comp, ids...)
		for range ids {
			mask = append(mask, reply)
		}
	}
	return Example{Prompt: prompt, Completion: comp}, mask, nil
}

// ToolOutcome is how ToolPlay judged an episode.
type ToolOutcome struct {
	// Solved: answer.txt held the sum when the episode ended.
	Solved bool
	// Read: the episode read input.txt.
	Read bool
}

// ToolPlay plays n episodes of each problem at temperature t in memory
// (no sandbox: read_file, write_file and submit as environments/agent
// runs them for this task; judged after 2 replies, as examples/tools-demo
// judges them with max_replies: 2) and returns their outcomes,
// problem by problem. It is pretraining's quick check; in a run, the
// sandboxed agent environment is the judge.
func (m *Model) ToolPlay(ctx context.Context, a *Adapter, problems []ToolProblem, n int, t float64, seed int64) ([][]ToolOutcome, error) {
	type ep struct {
		p     ToolProblem
		msgs  []policy.Message
		files map[string]string
		out   ToolOutcome
		done  bool
	}
	var eps []*ep
	for _, p := range problems {
		for range n {
			eps = append(eps, &ep{p: p, msgs: []policy.Message{{Role: "user", Content: ToolInstruction}},
				files: map[string]string{ToolInputFile: p.Input()}})
		}
	}
	for turn := 0; turn < 2; turn++ {
		var live []*ep
		var reqs []policy.Request
		for k, e := range eps {
			if !e.done {
				live = append(live, e)
				reqs = append(reqs, policy.Request{ID: strconv.Itoa(k), Messages: e.msgs, Seed: seed + int64(k)*7 + int64(turn)})
			}
		}
		if len(reqs) == 0 {
			break
		}
		out, err := m.Generate(ctx, a, reqs, policy.Sampling{Temperature: t, MaxTokens: 176})
		if err != nil {
			return nil, err
		}
		for k, e := range live {
			s := out[k][0]
			if s.Status != policy.StatusOK {
				e.done = true
				continue
			}
			_, calls, err := toolcall.Parse(s.Text)
			if err != nil || len(calls) == 0 {
				e.done = true
				e.out.Solved = e.files[ToolAnswerFile] == e.p.Answer()
				continue
			}
			// The reply as sampled: Parse compacts the calls' arguments,
			// and the model reads its own text back, as an episode run
			// token-in/token-out gives it.
			e.msgs = append(e.msgs, policy.Message{Role: "assistant", Content: s.Text})
			for _, c := range calls {
				var args struct{ Path, Text string }
				_ = json.Unmarshal([]byte(c.Arguments), &args)
				var res string
				switch c.Name {
				case "read_file":
					if args.Path == ToolInputFile {
						e.out.Read = true
					}
					if f, ok := e.files[args.Path]; ok {
						res = f
					} else {
						res = "read_file: " + args.Path + ": no such file or directory"
					}
				case "write_file":
					e.files[args.Path] = args.Text
					res = fmt.Sprintf("wrote %d bytes to %s", len(args.Text), args.Path)
				case "submit":
					e.done = true
				default:
					res = "unknown tool " + c.Name
				}
				if e.done {
					break
				}
				e.msgs = append(e.msgs, policy.Message{Role: "tool", Content: res})
			}
			if e.done || turn == 1 {
				e.done = true
				e.out.Solved = e.files[ToolAnswerFile] == e.p.Answer()
			}
		}
	}
	res := make([][]ToolOutcome, len(problems))
	for i := range problems {
		for _, e := range eps[i*n : (i+1)*n] {
			res[i] = append(res[i], e.out)
		}
	}
	return res, nil
}

// ToolSuccess is the share of ToolPlay's episodes solved.
func ToolSuccess(outs [][]ToolOutcome) float64 {
	solved, all := 0, 0
	for _, o := range outs {
		for _, e := range o {
			all++
			if e.Solved {
				solved++
			}
		}
	}
	if all == 0 {
		return 0
	}
	return float64(solved) / float64(all)
}
