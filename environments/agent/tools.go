package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/policy/toolcall"
	"github.com/rlpipe/rlpipe/sandbox"
)

// Tools are the agent's tools in the function-calling format, offered
// when Options.Tools is set: bash runs a script in the sandbox as a fenced
// block does; read_file and write_file act on the workspace from the host,
// with the sandbox's path rules (paths relative to /work, or absolute
// under /work; nothing out of the workspace, through ".." or a symlink);
// submit ends the episode, as a reply without a call does.
var Tools = []toolcall.Tool{
	{Type: "function", Function: toolcall.Function{Name: "bash",
		Description: "Run a bash script in the working directory /work, without network access; returns its exit status, stdout and stderr.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"cmd": {"type": "string", "description": "the script"}}, "required": ["cmd"], "additionalProperties": false}`)}},
	{Type: "function", Function: toolcall.Function{Name: "read_file",
		Description: "Read a text file of the workspace.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string", "description": "relative to /work"}}, "required": ["path"], "additionalProperties": false}`)}},
	{Type: "function", Function: toolcall.Function{Name: "write_file",
		Description: "Write a text file of the workspace, replacing it; its directory must exist.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string", "description": "relative to /work"}, "text": {"type": "string"}}, "required": ["path", "text"], "additionalProperties": false}`)}},
	{Type: "function", Function: toolcall.Function{Name: "submit",
		Description: "Finish the task; your files are then checked.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"answer": {"type": "string", "description": "a final answer, if the task asks for one"}}, "additionalProperties": false}`)}},
}

// ToolsHelp tells the policy how to call the tools; with Options.Tools the
// Env appends it to the task's instruction in place of FormatHelp.
const ToolsHelp = "Use the tools bash, read_file, write_file and submit. Call one as\n" +
	"<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>\n" +
	"Paths are relative to your working directory /work; commands run without network access. " +
	"When you are done, call submit."

// callHelp ends the feedback on a malformed call.
const callHelp = "nothing was run. Call a tool as <tool_call>{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}</tool_call>"

// Tools returns the tools the Env offers: Tools with Options.Tools, else
// none (the fenced bash block only).
func (e *Env) Tools() []toolcall.Tool {
	if !e.o.Tools {
		return nil
	}
	return Tools
}

var _ environments.ToolOffer = (*Env)(nil)

// callTools runs the calls of a reply that holds <tool_call>: each in
// order, each answered in Step.ToolResults; submit judges the workspace
// and ends the episode, and calls after it are not run. A reply whose
// calls cannot be read runs none and says why.
func (e *Env) callTools(ctx context.Context, action string, info map[string]any) (environments.Step, error) {
	_, calls, err := toolcall.Parse(action)
	if err != nil && e.o.EndOnMalformed {
		info["malformed_tool_call"] = err.Error()
		return e.finish(ctx, info)
	}
	if err != nil {
		return environments.Step{Observation: err.Error() + "; " + callHelp, Info: info}, nil
	}
	results := make([]string, 0, len(calls))
	for i, c := range calls {
		e.calls++
		info["tool_calls"] = e.calls
		if err := toolcall.Check(Tools, c); err != nil {
			results = append(results, err.Error())
			continue
		}
		var args struct{ Cmd, Path, Text, Answer string }
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
			return environments.Step{}, fmt.Errorf("tool call %d: read the checked arguments of %s: %w", e.calls, c.Name, err)
		}
		var out string
		switch c.Name {
		case "bash":
			if out, err = e.bash(ctx, args.Cmd); err != nil {
				return environments.Step{}, err
			}
		case "read_file":
			out = e.readFile(args.Path)
		case "write_file":
			out = e.writeFile(args.Path, args.Text)
		case "submit":
			info["answer"] = args.Answer
			st, err := e.finish(ctx, info)
			if err != nil {
				return st, err
			}
			st.ToolResults = append(results, "submitted")
			for range calls[i+1:] {
				st.ToolResults = append(st.ToolResults, "not run: the episode ended at submit")
			}
			return st, nil
		}
		results = append(results, out)
	}
	return environments.Step{ToolResults: results, Info: info}, nil
}

// workPath maps a path the policy gave to one relative to the workspace
// root: relative to /work, or absolute under /work.
func workPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("the path is empty")
	}
	rel := p
	if path.IsAbs(p) {
		clean := path.Clean(p)
		if clean != "/work" && !strings.HasPrefix(clean, "/work/") {
			return "", fmt.Errorf("%s is outside the workspace: give a path relative to the working directory /work", p)
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(clean, "/work"), "/")
	}
	rel = path.Clean(rel)
	if rel == "" {
		rel = "."
	}
	if rel != "." && !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is outside the workspace: \"..\" may not climb out of /work", p)
	}
	return rel, nil
}

// openBeneath opens the workspace path p (as the policy gave it) with
// flags, resolving it beneath the workspace root only: a symlink that
// leads out of it (absolute, ".." out, /proc) is refused, as the sandbox
// would never let it reach the host.
func (e *Env) openBeneath(p string, flags int, mode uint32) (*os.File, error) {
	rel, err := workPath(p)
	if err != nil {
		return nil, err
	}
	root, err := unix.Open(e.ws.Root(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %v", err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	switch {
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s leads out of the workspace through a symlink", p)
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("%s: no such file or directory", p)
	case errors.Is(err, unix.EISDIR):
		return nil, fmt.Errorf("%s is a directory", p)
	case err != nil:
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// readFile is read_file's result: the file's text, its head and tail
// when longer than ObservationBytes, or what went wrong.
func (e *Env) readFile(p string) string {
	f, err := e.openBeneath(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "read_file: " + err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Sprintf("read_file: %s is not a regular file", p)
	}
	limit := e.o.ObservationBytes
	if limit <= 0 {
		limit = DefaultObservationBytes
	}
	// Read enough for clip's head and tail and the count of what it cut.
	b, err := io.ReadAll(io.LimitReader(f, sandbox.DefaultFileBytes))
	if err != nil {
		return "read_file: " + err.Error()
	}
	if len(b) == 0 {
		return "(empty file)"
	}
	return clip(string(b), limit)
}

// writeFile is write_file's result: how much was written, or what went
// wrong.
func (e *Env) writeFile(p, text string) string {
	if err := e.putFile(p, text); err != nil {
		return "write_file: " + err.Error()
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(text), p)
}

// putFile writes text to the workspace path p (as the policy gave it),
// replacing the file; it belongs to the sandbox's user, as one bash wrote
// would.
func (e *Env) putFile(p, text string) error {
	limit := cmp.Or(e.o.Limits.FileBytes, sandbox.DefaultFileBytes)
	if int64(len(text)) > limit {
		return fmt.Errorf("%d bytes is past the file size limit of %d bytes; nothing was written", len(text), limit)
	}
	f, err := e.openBeneath(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if uid, gid := sandbox.SandboxUID(); uid != os.Geteuid() {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if _, err := f.WriteString(text); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("no space left: the episode may write at most its workspace's limit; %s is cut short", p)
		}
		return err
	}
	return nil
}
