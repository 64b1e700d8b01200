package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments"
	"github.com/rlpipe/rlpipe/environments/agent"
	"github.com/rlpipe/rlpipe/sandbox"
)

// call writes one Hermes call.
func call(name, args string) string {
	return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
}

func toolEnv(t *testing.T) *agent.Env {
	t.Helper()
	_, w := newWorld(t)
	env, err := agent.NewEnv(w, agent.Task{Instruction: "Write 42 to out.txt.", Verifier: `test "$(cat out.txt)" = 42`},
		&agent.Options{Tools: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.End() })
	return env
}

// With Options.Tools the env offers bash, read_file, write_file and
// submit; a reply's calls run in order, each answered, and submit judges
// the workspace.
func TestToolCallsRun(t *testing.T) {
	env := toolEnv(t)
	if got := env.Tools(); len(got) != 4 || got[3].Function.Name != "submit" {
		t.Fatalf("Tools() = %+v", got)
	}
	ctx := context.Background()
	obs, err := env.Reset(ctx, "tools-1")
	if err != nil || !strings.HasSuffix(obs, agent.ToolsHelp) {
		t.Fatalf("Reset = %q, %v", obs, err)
	}
	st, err := env.Step(ctx, "I will write it.\n"+call("write_file", `{"path": "out.txt", "text": "42"}`)+"\n"+
		call("read_file", `{"path": "/work/a.txt"}`)+"\n"+call("bash", `{"cmd": "cat out.txt; ls dir"}`))
	want := []string{"wrote 2 bytes to out.txt", "alpha\n", "exit status 0 (ok)\nstdout:\n42c.txt\nstderr:\n(empty)"}
	if err != nil || st.Done || st.Observation != "" || !reflect.DeepEqual(st.ToolResults, want) || st.Info["tool_calls"] != 3 {
		t.Fatalf("Step = %+v, %v\nwant results %q", st, err, want)
	}
	st, err = env.Step(ctx, call("submit", `{"answer": "done"}`)+"\n"+call("bash", `{"cmd": "rm out.txt"}`))
	if err != nil || !st.Done || st.Reward != 1 || st.Observation != "verified: reward 1" || st.Info["answer"] != "done" ||
		!reflect.DeepEqual(st.ToolResults, []string{"submitted", "not run: the episode ended at submit"}) {
		t.Fatalf("submit: %+v, %v", st, err)
	}
}

// Bad calls are the policy's mistakes: each is answered naming the
// problem, nothing runs, and nothing leaves the workspace.
func TestToolCallFaults(t *testing.T) {
	env := toolEnv(t)
	ctx := context.Background()
	if _, err := env.Reset(ctx, "tools-faults"); err != nil {
		t.Fatal(err)
	}
	// Links out of the workspace, made in the sandbox as an agent would.
	if st, err := env.Step(ctx, call("bash", `{"cmd": "ln -s /etc/hostname host && ln -s ../.. up && ln -s a.txt inside"}`)); err != nil || !strings.HasPrefix(st.ToolResults[0], "exit status 0") {
		t.Fatalf("make links: %+v, %v", st, err)
	}
	root := env.Workspace().Root()
	for _, tc := range []struct{ name, reply, want string }{
		{"malformed JSON", "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}\n</tool_call>", ""},
		{"unknown tool", call("python", `{"code": "1"}`),
			`tool call does not match the tools offered: unknown tool "python": call one of bash, read_file, write_file, submit`},
		{"missing required key", call("write_file", `{"path": "out.txt"}`),
			`tool call does not match the tools offered: write_file needs the argument "text"`},
		{"unknown argument", call("bash", `{"cmd": "ls", "cwd": "/"}`),
			`tool call does not match the tools offered: bash takes no argument "cwd"; its arguments are cmd`},
		{"write with ..", call("write_file", `{"path": "../escape.txt", "text": "x"}`),
			`write_file: ../escape.txt is outside the workspace: ".." may not climb out of /work`},
		{"write an absolute path", call("write_file", `{"path": "/etc/escape.txt", "text": "x"}`),
			`write_file: /etc/escape.txt is outside the workspace: give a path relative to the working directory /work`},
		{"write through a symlink out", call("write_file", `{"path": "host", "text": "x"}`),
			`write_file: host leads out of the workspace through a symlink`},
		{"read through a directory link out", call("read_file", `{"path": "up/etc/passwd"}`),
			`read_file: up/etc/passwd leads out of the workspace through a symlink`},
		{"read a directory", call("read_file", `{"path": "dir"}`), `read_file: dir is not a regular file`},
		{"read a missing file", call("read_file", `{"path": "nope.txt"}`), `read_file: nope.txt: no such file or directory`},
		{"read through a link inside", call("read_file", `{"path": "inside"}`), "alpha\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := env.Step(ctx, tc.reply)
			if err != nil || st.Done {
				t.Fatalf("Step = %+v, %v", st, err)
			}
			if tc.want == "" {
				want := `malformed tool call: call 1: want a JSON object {"name": …, "arguments": {…}}: unexpected EOF; nothing was run. Call a tool as <tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>`
				if st.Observation != want || st.ToolResults != nil {
					t.Errorf("observation %q, results %q\nwant %q", st.Observation, st.ToolResults, want)
				}
				return
			}
			if !reflect.DeepEqual(st.ToolResults, []string{tc.want}) {
				t.Errorf("results %q\nwant %q", st.ToolResults, tc.want)
			}
		})
	}
	// A file write_file made is the sandbox user's, as one bash made.
	st, err := env.Step(ctx, call("write_file", `{"path": "w.txt", "text": "a"}`)+call("bash", `{"cmd": "echo b >> w.txt && cat w.txt"}`))
	if want := []string{"wrote 1 bytes to w.txt", "exit status 0 (ok)\nstdout:\nab\nstderr:\n(empty)"}; err != nil || !reflect.DeepEqual(st.ToolResults, want) {
		t.Errorf("write then append: %q, %v\nwant %q", st.ToolResults, err, want)
	}
	for _, p := range []string{filepath.Join(filepath.Dir(root), "escape.txt"), "/etc/escape.txt"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written, out of the workspace", p)
		}
	}
	if b, _ := os.ReadFile("/etc/hostname"); strings.TrimSpace(string(b)) == "x" {
		t.Error("/etc/hostname was written through the link")
	}
}

// Without <tool_call> the fenced bash block still runs (a base model's
// format) and a plain reply is the final answer; the runner records a
// structured call's turns with tool messages.
func TestToolsFallbackAndRunner(t *testing.T) {
	env := toolEnv(t)
	r, err := environments.NewRunner(script(
		"```bash\necho 42 > out.txt\n```",
		call("read_file", `{"path": "out.txt"}`),
		"Done.",
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), env, environments.Episode{ID: "tools-runner"})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, tu := range res.Trajectory.Turns {
		roles = append(roles, tu.Role)
	}
	tr := res.Trajectory
	if tr.Status != tables.StatusOK || res.Reward != 1 || strings.Join(roles, ",") != "user,assistant,user,assistant,tool,assistant,user" {
		t.Fatalf("status %s, reward %v, roles %v", tr.Status, res.Reward, roles)
	}
	if c := tr.Turns[1].ToolCalls; c == nil || *c != `[{"tool":"bash","command":"echo 42 \u003e out.txt"}]` {
		t.Errorf("the fenced call's tool_calls %v", c)
	}
	if c := tr.Turns[3].ToolCalls; c == nil || *c != `[{"id":"call_1_0","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"out.txt\"}"}}]` {
		t.Errorf("the structured call's tool_calls %v", c)
	}
	if tr.Turns[4].Content != "42\n" {
		t.Errorf("the tool turn %q, want the file", tr.Turns[4].Content)
	}
}

// rl_options tools: true offers the tools; without it, none (and the
// options encode as before, so the cache key is unchanged).
func TestRLEnvTools(t *testing.T) {
	world := t.TempDir()
	if err := os.WriteFile(filepath.Join(world, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := tables.Prompt{PromptID: "p", Prompt: "Do it.", Metadata: `{"verifier": "true"}`}
	for _, tools := range []bool{false, true} {
		mk, _, err := agent.RLEnv.Open(&agent.PipelineOptions{World: world, WorldCache: t.TempDir(), Tools: tools}, "")
		if err != nil {
			t.Fatal(err)
		}
		env, err := mk(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := env.(environments.ToolOffer).Tools(); (len(got) == 4) != tools {
			t.Errorf("tools %v: offered %d tools", tools, len(got))
		}
	}
}

// A task's own files are in every episode's workspace, beside the
// world's, and in no other task's; NoHelp gives the instruction alone.
// The tiny tool demo's episode, played by hand: read the input, write
// the sum, submit.
func TestTaskFiles(t *testing.T) {
	_, w := newWorld(t)
	ctx := context.Background()
	sum := agent.Task{Instruction: "Sum input.txt into answer.txt.", Files: map[string][]byte{"input.txt": []byte("7 5"), "dir/note.txt": []byte("n")},
		Checks: map[string][]byte{"answer.txt": []byte("12")}, Verifier: `test "$(cat answer.txt)" = "$(cat /check/answer.txt)"`}
	env, err := agent.NewEnv(w, sum, &agent.Options{Tools: true, NoHelp: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.End()
	other, err := agent.NewEnv(w, agent.Task{Instruction: "Look.", Verifier: "test ! -e input.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.End()
	if obs, err := env.Reset(ctx, "files-1"); err != nil || obs != sum.Instruction {
		t.Fatalf("Reset = %q, %v; want the instruction alone", obs, err)
	}
	if _, err := other.Reset(ctx, "files-2"); err != nil {
		t.Fatal(err)
	}
	st, err := env.Step(ctx, call("read_file", `{"path": "input.txt"}`))
	if err != nil || !reflect.DeepEqual(st.ToolResults, []string{"7 5"}) {
		t.Fatalf("read the task's file: %+v, %v", st, err)
	}
	st, err = env.Step(ctx, "7+5=12\n"+call("write_file", `{"path": "answer.txt", "text": "12"}`)+"\n"+call("submit", `{}`))
	if err != nil || !st.Done || st.Reward != 1 || !reflect.DeepEqual(st.ToolResults, []string{"wrote 2 bytes to answer.txt", "submitted"}) {
		t.Fatalf("solve: %+v, %v", st, err)
	}
	// The other task's episode, on the same world, has no input.txt.
	if st, err := other.Step(ctx, "done"); err != nil || st.Reward != 1 {
		t.Fatalf("the other task's workspace has the first task's file: %+v, %v", st, err)
	}
	// The files are written as the sandbox's user would: the agent can
	// rewrite them (they are the task's input, not protected).
	if _, err := env.Reset(ctx, "files-3"); err != nil {
		t.Fatal(err)
	}
	if st, err := env.Step(ctx, call("bash", `{"cmd": "echo 1 1 > input.txt && cat input.txt dir/note.txt"}`)); err != nil || !strings.Contains(st.ToolResults[0], "1 1\nn") {
		t.Fatalf("rewrite the task's file: %+v, %v", st, err)
	}
}

// Task files the world cannot hold, that would be protected, or that
// are past the file size limit are refused when the env is made, naming
// the file; so is a path through (or onto) a symlink of the world.
func TestTaskFilesInvalid(t *testing.T) {
	src := t.TempDir()
	for name, text := range worldFiles {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"link": "dir", "passwd": "/etc/passwd"} {
		if err := os.Symlink(to, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, w := cachedWorld(t, agent.WorldSpec{Name: "links", Source: src})
	for _, tc := range []struct {
		name      string
		file      string
		protected []string
		size      int64
		want      string
	}{
		{"climbs out", "../x.txt", nil, 0, "want a clean relative path, e.g. input.txt or data/input.txt"},
		{"absolute", "/etc/x", nil, 0, "want a clean relative path, e.g. input.txt or data/input.txt"},
		{"missing directory", "nodir/x.txt", nil, 0, "nodir is not a directory of the world: a task file goes in a directory the world has"},
		{"through a symlink", "link/x.txt", nil, 0, "link is not a directory of the world: a task file goes in a directory the world has"},
		{"onto a symlink", "passwd", nil, 0, "the world has it as a symlink, not a regular file"},
		{"a directory of the world", "dir", nil, 0, "the world has it as a directory, not a regular file"},
		{"protected", "a.txt", []string{"a.txt"}, 0, "it is protected (a.txt): protected paths are compared with the world, which does not have the task's files"},
		{"under a protected directory", "dir/new.txt", []string{"dir"}, 0, "it is protected (dir): protected paths are compared with the world, which does not have the task's files"},
		{"past the file size limit", "big.txt", nil, 1, "2 bytes is past the sandbox's file size limit of 1 bytes"},
	} {
		_, err := agent.NewEnv(w, agent.Task{Instruction: "x", Verifier: "true", Protected: tc.protected,
			Files: map[string][]byte{tc.file: []byte("xy")}}, &agent.Options{Limits: sandbox.Limits{FileBytes: tc.size}})
		want := fmt.Sprintf("agent env for world %q: task file %q: %s: %v", "links", tc.file, tc.want, agent.ErrInvalid)
		if !errors.Is(err, agent.ErrInvalid) || err.Error() != want {
			t.Errorf("%s: err = %v\nwant %s", tc.name, err, want)
		}
	}
}

// A prompt row's metadata gives the task's files; no_help drops the
// tools' help from the instruction.
func TestRLEnvTaskFiles(t *testing.T) {
	world := t.TempDir()
	if err := os.WriteFile(filepath.Join(world, "README"), []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk, _, err := agent.RLEnv.Open(&agent.PipelineOptions{World: world, WorldCache: t.TempDir(), Tools: true, NoHelp: true, EndOnMalformed: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := mk(tables.Prompt{PromptID: "p", Prompt: "Sum input.txt into answer.txt.",
		Metadata: `{"files": {"input.txt": "2 3"}, "checks": {"answer.txt": "5"}, "verifier": "test \"$(cat answer.txt)\" = \"$(cat /check/answer.txt)\""}`})
	if err != nil {
		t.Fatal(err)
	}
	defer env.End()
	ctx := context.Background()
	if obs, err := env.Reset(ctx, "p-0"); err != nil || obs != "Sum input.txt into answer.txt." {
		t.Fatalf("Reset = %q, %v", obs, err)
	}
	if st, err := env.Step(ctx, call("read_file", `{"path": "input.txt"}`)); err != nil || st.ToolResults[0] != "2 3" {
		t.Fatalf("read: %+v, %v", st, err)
	}
	if st, err := env.Step(ctx, call("write_file", `{"path": "answer.txt", "text": "5"}`)+"\n"+call("submit", `{}`)); err != nil || st.Reward != 1 {
		t.Fatalf("solve: %+v, %v", st, err)
	}
	// end_on_malformed: a reply whose call cannot be read is judged.
	if _, err := env.Reset(ctx, "p-1"); err != nil {
		t.Fatal(err)
	}
	if st, err := env.Step(ctx, "<tool_call>\n{\"name\": \"read_file\"\n</tool_call>"); err != nil || !st.Done || st.Reward != 0 || st.Info["malformed_tool_call"] == nil {
		t.Fatalf("malformed: %+v, %v", st, err)
	}
}

// With EndOnMalformed a reply whose calls (or fenced block) cannot be
// read ends the episode, judged as it stands by the whole judgement:
// what was written before counts, and so does tampering.
func TestEndOnMalformed(t *testing.T) {
	_, w := newWorld(t)
	env, err := agent.NewEnv(w, agent.Task{Instruction: "Write 42 to out.txt.", Verifier: `test "$(cat out.txt)" = 42`, Protected: []string{"a.txt"}},
		&agent.Options{Tools: true, EndOnMalformed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.End()
	ctx := context.Background()
	malformed := "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}\n</tool_call>"
	for _, tc := range []struct {
		name, before, reply string
		reward              float64
		status, malformed   string
	}{
		{"nothing written", "", malformed, 0, "failed", "call 1: want a JSON object"},
		{"the answer written", `{"path": "out.txt", "text": "42"}`, malformed, 1, "ok", "call 1: want a JSON object"},
		{"a protected file rewritten", `{"path": "a.txt", "text": "42"}`, malformed, 0, agent.StatusTampered, "call 1: want a JSON object"},
		{"a fenced block unclosed", `{"path": "out.txt", "text": "42"}`, "```bash\nls", 1, "ok", "the ```bash block is not closed"},
	} {
		if _, err := env.Reset(ctx, "malformed"); err != nil {
			t.Fatal(err)
		}
		if tc.before != "" {
			if st, err := env.Step(ctx, call("write_file", tc.before)); err != nil || st.Done {
				t.Fatalf("%s: write: %+v, %v", tc.name, st, err)
			}
		}
		st, err := env.Step(ctx, tc.reply)
		if err != nil || !st.Done || st.Reward != tc.reward || st.Info["verifier_status"] != tc.status ||
			!strings.Contains(fmt.Sprint(st.Info["malformed_tool_call"]), tc.malformed) {
			t.Errorf("%s: a malformed reply gave %+v, %v; want the episode judged %s, reward %g", tc.name, st, err, tc.status, tc.reward)
		}
	}
}

// With MaxReplies the reply that spends the budget runs its calls, then
// the workspace is judged: an episode that never submits is still scored.
func TestMaxReplies(t *testing.T) {
	_, w := newWorld(t)
	task := agent.Task{Instruction: "Write 42 to out.txt.", Verifier: `test "$(cat out.txt)" = 42`}
	ctx := context.Background()
	env, err := agent.NewEnv(w, task, &agent.Options{Tools: true, MaxReplies: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer env.End()
	for i := range 2 {
		if _, err := env.Reset(ctx, fmt.Sprintf("replies-%d", i)); err != nil {
			t.Fatal(err)
		}
		if st, err := env.Step(ctx, call("write_file", `{"path": "out.txt", "text": "42"}`)); err != nil || st.Done {
			t.Fatalf("reply 1: %+v, %v", st, err)
		}
		st, err := env.Step(ctx, call("read_file", `{"path": "a.txt"}`))
		if err != nil || !st.Done || st.Reward != 1 || st.Info["replies_spent"] != 2 || !reflect.DeepEqual(st.ToolResults, []string{"alpha\n"}) {
			t.Fatalf("reply 2 (episode %d): %+v, %v; want its call run, then the workspace judged", i, st, err)
		}
	}
	// Submit on the last reply: one verdict, the calls answered.
	if _, err := env.Reset(ctx, "replies-submit"); err != nil {
		t.Fatal(err)
	}
	if st, err := env.Step(ctx, call("read_file", `{"path": "a.txt"}`)); err != nil || st.Done {
		t.Fatalf("reply 1: %+v, %v", st, err)
	}
	st, err := env.Step(ctx, call("write_file", `{"path": "out.txt", "text": "42"}`)+"\n"+call("submit", `{}`))
	if err != nil || !st.Done || st.Reward != 1 || st.Info["replies_spent"] != nil || st.Observation != "verified: reward 1" ||
		!reflect.DeepEqual(st.ToolResults, []string{"wrote 2 bytes to out.txt", "submitted"}) {
		t.Fatalf("submit on the last reply: %+v, %v", st, err)
	}
	// The fenced block too; its output stays before the verdict.
	fenced, err := agent.NewEnv(w, task, &agent.Options{MaxReplies: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fenced.End()
	if _, err := fenced.Reset(ctx, "fenced"); err != nil {
		t.Fatal(err)
	}
	want := "exit status 0 (ok)\nstdout:\nwritten\nstderr:\n(empty)\nverified: reward 1"
	if st, err := fenced.Step(ctx, "```bash\necho 42 > out.txt; echo written\n```"); err != nil || !st.Done || st.Reward != 1 || st.Observation != want {
		t.Fatalf("fenced: %+v, %v\nwant the observation %q", st, err, want)
	}
	_, _, err = agent.RLEnv.Open(&agent.PipelineOptions{World: t.TempDir(), MaxReplies: -1}, "")
	if want := "max_replies -1: want a number of replies ≥ 0 (0: no budget but the stage's max_turns)"; err == nil || err.Error() != want {
		t.Errorf("max_replies -1: %v, want %s", err, want)
	}
}
