package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rlpipe/rlpipe/sandbox"
)

// FormatHelp tells the policy how to call the tool; the Env appends it to
// the task's instruction.
const FormatHelp = "To run a command, reply with one bash code block:\n\n" +
	"```bash\n<commands>\n```\n\n" +
	"The commands run in your working directory with bash, without network access; " +
	"you will see their exit status and output. When you are done, reply without a code block."

// ToolCall is one call of the bash tool.
type ToolCall struct {
	Tool    string `json:"tool"`
	Command string `json:"command"`
}

// JSON returns the call as the trajectory's tool_calls JSON text: a list
// of one {"tool": "bash", "command": …} object.
func (c ToolCall) JSON() (string, error) {
	b, err := json.Marshal([]ToolCall{c})
	if err != nil {
		return "", fmt.Errorf("encode the %s tool call: %w", c.Tool, err)
	}
	return string(b), nil
}

// ErrUnclosedBlock: a bash block was opened and never closed.
var ErrUnclosedBlock = errors.New("the ```bash block is not closed with a ``` line")

// ParseToolCall finds the tool call in an assistant message: the first
// fenced code block whose info string is bash, sh or shell (any case),
// from its opening line (``` followed by the name) to the next line that
// is just ``` (either may be indented). ok is false when the message holds
// no such block: it is then the final answer. A block opened and never
// closed gives ErrUnclosedBlock, so a reply cut short by the token limit
// is not run in part.
func ParseToolCall(msg string) (call ToolCall, ok bool, err error) {
	lines := strings.Split(msg, "\n")
	for i := 0; i < len(lines); i++ {
		open := strings.TrimSpace(lines[i])
		info, isFence := strings.CutPrefix(open, "```")
		if !isFence {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(info)) {
		case "bash", "sh", "shell":
		default:
			// Skip another language's block whole.
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(strings.TrimSuffix(lines[j], "\r")) == "```" {
				body := slices.Clone(lines[i+1 : j])
				for k, l := range body {
					body[k] = strings.TrimSuffix(l, "\r")
				}
				return ToolCall{Tool: "bash", Command: strings.Join(body, "\n")}, true, nil
			}
		}
		return ToolCall{}, false, ErrUnclosedBlock
	}
	return ToolCall{}, false, nil
}

// DefaultObservationBytes bounds each of stdout and stderr in an
// observation.
const DefaultObservationBytes = 2048

// Observation formats a command's result for the policy:
//
//	exit status 0 (ok)
//	stdout:
//	…
//	stderr:
//	…
//
// with "(empty)" for an empty stream. A stream longer than limit bytes
// keeps its first and last limit/2 bytes around a line saying how many
// were cut. A status other than ok or failed is named: "exit status -1
// (timeout: the command ran out of time)".
func Observation(r sandbox.Result, limit int) string {
	if limit <= 0 {
		limit = DefaultObservationBytes
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit status %d (%s", r.ExitCode, r.Status)
	if why := statusWhy[r.Status]; why != "" {
		b.WriteString(": " + why)
	}
	b.WriteString(")\n")
	for _, s := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		b.WriteString(s.name + ":\n")
		if s.text == "" {
			b.WriteString("(empty)\n")
			continue
		}
		t := clip(s.text, limit)
		b.WriteString(t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteString("\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var statusWhy = map[sandbox.Status]string{
	sandbox.StatusTimeout:     "the command ran out of time",
	sandbox.StatusMemory:      "the command ran out of memory",
	sandbox.StatusOutputLimit: "the command printed too much and was stopped",
	sandbox.StatusFileLimit:   "a file grew past the size limit or the disk is full",
	sandbox.StatusKilled:      "the command was killed by a signal",
}

// clip keeps the first and last limit/2 bytes of s, on character
// boundaries, around a note of how many bytes were cut.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head, tail := limit/2, limit-limit/2
	// Back off to the start of the character cut in two; bytes that are
	// not UTF-8 at all (binary output) are kept, not a reason to drop the
	// whole head.
	for k := 0; k < utf8.UTFMax-1 && head > 0 && !utf8.RuneStart(s[head]); k++ {
		head--
	}
	h := s[:head]
	t := s[len(s)-tail:]
	for k := 0; k < utf8.UTFMax-1 && len(t) > 0 && !utf8.RuneStart(t[0]); k++ {
		t = t[1:]
	}
	return fmt.Sprintf("%s\n[… %d bytes cut …]\n%s", h, len(s)-len(h)-len(t), t)
}
