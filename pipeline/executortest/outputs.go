package executortest

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
)

var outputScenarios = []scenario{
	{Name: "Uploaded", Run: testOutputsUploaded},
	{Name: "Missing", Run: testOutputsMissing},
}

// testOutputsUploaded: a task's declared outputs — two files with the
// same bytes and a directory — are staged on the run's branch under the
// call's directory, each result carrying the store's checksum of its
// bytes; a downstream call reads them as its inputs.
func testOutputsUploaded(x subject) {
	t := x.t
	const table, config, weights = "prompt,answer\n2+2,4\n", `{"r": 8}`, "\x00\x01\x02 weights"
	produce := &pipeline.Task{Name: "produce", Env: env,
		Outputs: []pipeline.Output{{Name: "table", File: "table.csv"}, {Name: "copy", File: "copy.csv"}, {Name: "adapter", Dir: true}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			dir := tc.OutputPath("adapter")
			if err := os.MkdirAll(filepath.Join(dir, "weights"), 0o755); err != nil {
				return err
			}
			for path, content := range map[string]string{
				tc.OutputPath("table"):                    table,
				tc.OutputPath("copy"):                     table,
				filepath.Join(dir, "adapter_config.json"): config,
				filepath.Join(dir, "weights", "a.bin"):    weights,
			} {
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					return err
				}
			}
			return nil
		}}
	consume := &pipeline.Task{Name: "consume", Env: env, Outputs: []pipeline.Output{{Name: "seen"}},
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			var parts []string
			for _, p := range []string{tc.InputPath("table"), filepath.Join(tc.InputPath("adapter"), "adapter_config.json"), filepath.Join(tc.InputPath("adapter"), "weights", "a.bin")} {
				b, err := os.ReadFile(p)
				if err != nil {
					return pipeline.Permanent(err)
				}
				parts = append(parts, string(b))
			}
			return write(tc, "seen", strings.Join(parts, "|"))
		}}
	f := open(x, "outputs-uploaded", produce, consume)
	ref, err := f.st.PutObject(f.ctx, "main", "ref/table.csv", strings.NewReader(table), nil)
	if err != nil {
		t.Fatalf("put main:ref/table.csv: %v", err)
	}
	n, err := f.call(f.ctx, produce, pipeline.Call{})
	if err != nil {
		t.Fatalf("call produce: %v", err)
	}
	f.wantEvents(n, "produce", ended{end: pipeline.EventFinished, attempts: 1})
	branch := f.run.Branch()
	for _, name := range []string{"table", "copy"} {
		a := f.result(n, name)
		want := runs.IterationPath(1, name+".csv")
		if a.Ref != branch || a.Path != want || a.Dir {
			t.Fatalf("output %s: %s:%s (dir %v), want %s:%s", name, a.Ref, a.Path, a.Dir, branch, want)
		}
		got, sum := f.readObject(a.Ref, a.Path)
		if got != table || a.Checksum != sum || a.Checksum != ref.Checksum {
			t.Fatalf("output %s: %q with checksum %q (the store's %q; the same bytes on main %q), want %q and one checksum", name, got, a.Checksum, sum, ref.Checksum, table)
		}
	}
	a := f.result(n, "adapter")
	if a.Ref != branch || a.Path != runs.AdapterPath(1) || !a.Dir {
		t.Fatalf("output adapter: %s:%s (dir %v), want the directory %s:%s", a.Ref, a.Path, a.Dir, branch, runs.AdapterPath(1))
	}
	listed := map[string]string{}
	for e, err := range f.st.ListObjects(f.ctx, branch, &artifacts.ListOptions{Prefix: a.Path + "/"}) {
		if err != nil {
			t.Fatalf("list %s:%s/: %v", branch, a.Path, err)
		}
		listed[strings.TrimPrefix(e.Path, a.Path+"/")] = e.Checksum
	}
	if len(listed) != 2 || !maps.Equal(a.Files, listed) {
		t.Fatalf("output adapter: files %v, the store lists %v; want adapter_config.json and weights/a.bin with the store's checksums", a.Files, listed)
	}
	for rel, want := range map[string]string{"adapter_config.json": config, "weights/a.bin": weights} {
		if got, _ := f.readObject(branch, a.Path+"/"+rel); got != want {
			t.Fatalf("output adapter: %s holds %q, want %q", rel, got, want)
		}
	}
	m, err := f.call(f.ctx, consume, pipeline.Call{Inputs: map[string]pipeline.Artifact{"table": n.Output("table"), "adapter": n.Output("adapter")}})
	if err != nil {
		t.Fatalf("call consume: %v", err)
	}
	s := f.result(m, "seen")
	if got, _ := f.readObject(s.Ref, s.Path); got != table+"|"+config+"|"+weights {
		t.Fatalf("consume read its inputs as %q, want %q", got, table+"|"+config+"|"+weights)
	}
}

// result returns a finished node's output name.
func (f *fixture) result(n *pipeline.Node, name string) pipeline.Artifact {
	f.t.Helper()
	a, err := n.Result(name)
	if err != nil {
		f.t.Fatalf("result %s: %v", name, err)
	}
	return a
}

// testOutputsMissing: an output the task did not write, an empty output
// directory and an output its Check refuses each fail the call at once
// with ErrOutput, Permanent, although three attempts are allowed.
func testOutputsMissing(x subject) {
	t := x.t
	cases := []struct {
		task *pipeline.Task
		msg  string
	}{
		{&pipeline.Task{Name: "lazy", Outputs: []pipeline.Output{{Name: "out"}},
			Run: func(ctx context.Context, tc *pipeline.TaskContext) error { return nil }},
			`did not write output "out"`},
		{&pipeline.Task{Name: "hollow", Outputs: []pipeline.Output{{Name: "adapter", Dir: true}},
			Run: func(ctx context.Context, tc *pipeline.TaskContext) error { return nil }},
			`wrote no files into output directory "adapter"`},
		{&pipeline.Task{Name: "malformed", Outputs: []pipeline.Output{{Name: "table", Check: func(string) error {
			return errors.New("column total: want double, found string")
		}}}, Run: func(ctx context.Context, tc *pipeline.TaskContext) error { return write(tc, "table", "x") }},
			"column total: want double, found string"},
	}
	var tasks []*pipeline.Task
	ran := map[string]*seen{}
	for _, c := range cases {
		c.task.Env, c.task.Settings = env, retrying(3)
		body, s := c.task.Run, &seen{}
		c.task.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
			s.add(tc)
			return body(ctx, tc)
		}
		ran[c.task.Name] = s
		tasks = append(tasks, c.task)
	}
	f := open(x, "outputs-missing", tasks...)
	for _, c := range cases {
		name := c.task.Name
		n, err := f.call(f.ctx, c.task, pipeline.Call{})
		wantFailure(t, name, err, failure{attempts: 1, is: []error{pipeline.ErrOutput}, permanent: true, msg: c.msg})
		ran[name].want(t, name, 1)
		f.wantEvents(n, name, ended{end: pipeline.EventFailed, attempts: 1})
	}
}
