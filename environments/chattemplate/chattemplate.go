package chattemplate

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/internal/bounded"
	"github.com/rlpipe/rlpipe/internal/lineproc"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

//go:embed render.py
var workerScript string

// Named errors. ErrWorker wraps environments.ErrInfra: an episode whose
// turn it failed ends infra_error; ErrTemplate (a template that raised,
// text the tokenizer refused) ends it env_error.
var (
	ErrWorker   = fmt.Errorf("chat template worker failed: %w", environments.ErrInfra)
	ErrTemplate = errors.New("chat template cannot render the turn")
)

// Options start a Renderer. Python and Tokenizer are required.
type Options struct {
	// Python is an interpreter with tokenizers, jinja2 and transformers
	// (the project's .venv-py has them).
	Python string
	// Tokenizer is the model's directory holding tokenizer.json and, for
	// the template's special tokens and its chat_template,
	// tokenizer_config.json (or chat_template.jinja).
	Tokenizer string
	// Template, when set, is a jinja file used instead of the tokenizer's
	// own template.
	Template string
}

// Renderer renders a Hugging Face chat template and tokenizes with the
// model's tokenizer, in a Python worker it supervises: a worker that died
// is started again at the next call. It is an environments.Renderer and
// is safe for concurrent use (calls are served one at a time).
type Renderer struct {
	o Options

	mu sync.Mutex
	w  *worker // nil: start one at the next call
}

var _ environments.Renderer = (*Renderer)(nil)

// Start checks o and starts the worker, which loads the tokenizer and the
// template; a tokenizer or template it cannot load is an error naming it.
func Start(ctx context.Context, o *Options) (*Renderer, error) {
	if o == nil || o.Python == "" || o.Tokenizer == "" {
		return nil, errors.New("chattemplate: start: Options.Python and Options.Tokenizer are required")
	}
	if _, err := os.Stat(filepath.Join(o.Tokenizer, "tokenizer.json")); err != nil {
		return nil, fmt.Errorf("chattemplate: start: the tokenizer directory %s has no tokenizer.json: %w; name the model's directory (its Hugging Face snapshot)", o.Tokenizer, err)
	}
	r := &Renderer{o: *o}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := startWorker(ctx, r.o)
	if err != nil {
		return nil, fmt.Errorf("chattemplate: start: %w", err)
	}
	r.w = w
	return r, nil
}

// Close stops the worker.
func (r *Renderer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.close()
		r.w = nil
	}
	return nil
}

// Render returns msgs as the template renders them, with tools offered
// (the template's tools block; nil offers none, the template's rendering
// without tools), ending with the generation prompt when gen is set.
func (r *Renderer) Render(ctx context.Context, msgs []policy.Message, tools []toolcall.Tool, gen bool) (string, error) {
	var out struct {
		Text string `json:"text"`
	}
	if msgs == nil {
		msgs = []policy.Message{}
	}
	req := map[string]any{"op": "render", "messages": msgs, "add_generation_prompt": gen}
	if len(tools) > 0 {
		req["tools"] = tools
	}
	err := r.call(ctx, req, &out)
	return out.Text, err
}

// Encode returns the token ids of text, without the special tokens a
// tokenizer adds around a sequence (a template writes its own).
func (r *Renderer) Encode(ctx context.Context, text string) ([]int32, error) {
	var out struct {
		IDs []int32 `json:"ids"`
	}
	err := r.call(ctx, map[string]any{"op": "encode", "text": text}, &out)
	return out.IDs, err
}

// endOfReply stands for the content of the last reply in the base
// conversation Suffix renders new messages after.
const endOfReply = "\x1fRLPIPE-END-OF-REPLY\x1f"

// Suffix renders msgs as they follow an episode's tokens
// (environments.Renderer). At the first turn (no reply) it is the
// template's rendering of msgs and tools with the generation prompt: the
// tools block (Qwen's, in the system turn) is in the prompt's tokens.
// history is not read: the episode's tokens hold it, and what follows a
// reply is rendered after a fixed base conversation instead, so that a
// template's rewriting of history never reaches the suffix. After a reply
// the template renders a fixed base conversation — a user message and a
// reply standing for the last one — followed by msgs, and Suffix keeps
// the text after that reply's content: the template's end of the turn,
// msgs and the generation prompt, never the earlier turns, which a
// template may render anew (Qwen3's drops <think> from replies before
// the last user message). Its tokens lose the longest run that also ends
// reply (the end-of-turn token the policy sampled): a reply cut short
// gets the template's end of turn, one that sampled it does not get it
// twice.
func (r *Renderer) Suffix(ctx context.Context, _ []policy.Message, reply []int32, msgs []policy.Message, tools []toolcall.Tool) ([]int32, error) {
	if reply == nil {
		text, err := r.Render(ctx, msgs, tools, true)
		if err != nil {
			return nil, err
		}
		return r.Encode(ctx, text)
	}
	base := []policy.Message{{Role: "user", Content: "."}, {Role: "assistant", Content: endOfReply}}
	text, err := r.Render(ctx, append(base, msgs...), nil, true)
	if err != nil {
		return nil, err
	}
	at := strings.LastIndex(text, endOfReply)
	if at < 0 {
		return nil, fmt.Errorf("%w: the template did not render a reply's content as it was given, so the turn after it cannot be cut out of its rendering", ErrTemplate)
	}
	ids, err := r.Encode(ctx, text[at+len(endOfReply):])
	if err != nil {
		return nil, err
	}
	for k := min(len(reply), len(ids)); k > 0; k-- {
		if slices.Equal(reply[len(reply)-k:], ids[:k]) {
			return ids[k:], nil
		}
	}
	return ids, nil
}

// call sends one request and decodes its reply into out, starting a
// worker when none runs. A worker that fails mid-call is stopped and
// replaced at the next call.
func (r *Renderer) call(ctx context.Context, req any, out any) error {
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%w: encode the request: %v", ErrTemplate, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		if r.w, err = startWorker(ctx, r.o); err != nil {
			return err
		}
	}
	raw, err := r.w.roundTrip(ctx, line)
	if err != nil {
		r.w.close()
		r.w = nil
		return err
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return fmt.Errorf("%w: %s", ErrTemplate, e.Error)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		r.w.close()
		r.w = nil
		return fmt.Errorf("%w: its reply %.200q is not the protocol's JSON: %v", ErrWorker, raw, err)
	}
	return nil
}

// worker is one Python process.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tail
}

func startWorker(ctx context.Context, o Options) (*worker, error) {
	args := []string{"-u", "-c", workerScript, o.Tokenizer}
	if o.Template != "" {
		args = append(args, o.Template)
	}
	// The worker outlives ctx (a call's); Close or a failed call stops it.
	cmd := exec.Command(o.Python, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorker, err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorker, err)
	}
	w := &worker{cmd: cmd, in: in, out: bufio.NewReaderSize(outPipe, 1<<16), stderr: &tail{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrWorker, o.Python, err)
	}
	raw, err := w.read(ctx)
	if err != nil {
		w.close()
		return nil, err
	}
	if ok, why := lineproc.Ready(raw); !ok {
		w.close()
		if why != "" {
			return nil, fmt.Errorf("load the tokenizer %s and its template: %s", o.Tokenizer, why)
		}
		return nil, fmt.Errorf("%w: its first line %.200q is not {\"ready\": true}", ErrWorker, raw)
	}
	return w, nil
}

// roundTrip writes a request line and reads the reply line.
func (w *worker) roundTrip(ctx context.Context, line []byte) ([]byte, error) {
	if _, err := w.in.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("%w: write a request: %v%s", ErrWorker, err, w.stderr.say())
	}
	return w.read(ctx)
}

// read reads one line, giving up (and killing the worker) when ctx ends.
func (w *worker) read(ctx context.Context) ([]byte, error) {
	b, err := lineproc.ReadLine(ctx, w.out, func() { w.cmd.Process.Kill() })
	switch {
	case errors.Is(err, lineproc.ErrGaveUp):
		return nil, fmt.Errorf("chattemplate: %w", ctx.Err())
	case err != nil:
		w.cmd.Wait()
		return nil, fmt.Errorf("%w: it exited (%v)%s", ErrWorker, w.cmd.ProcessState, w.stderr.say())
	}
	return b, nil
}

// close stops the worker: its stdin closed, the process killed and
// waited for.
func (w *worker) close() {
	w.in.Close()
	if w.cmd.ProcessState == nil {
		w.cmd.Process.Kill()
		w.cmd.Wait()
	}
}

// tail keeps the last 2 KiB a worker wrote to stderr, for error messages.
type tail struct{ bounded.Tail }

// say is ": stderr: <last line>" when the worker wrote to stderr.
func (t *tail) say() string {
	if s := t.LastLine(); s != "" {
		return ": stderr: " + s
	}
	return ""
}
