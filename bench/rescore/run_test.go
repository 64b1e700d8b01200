package rescore

import (
	"bufio"
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/rlpipe/rlpipe/rewards"
)

//go:embed rescore.sql
var rescoreSQL string

// specPath and scriptPath are beside this file: go test runs in the
// package's directory.
const (
	specPath   = "reward.yaml"
	scriptPath = "reward.py"
)

// contender rescores a data set into out, end to end: from the files on
// disk to the rewards file closed on disk.
type contender struct {
	name string
	ext  string // of the rewards file it writes
	run  func(ctx context.Context, d *dataset, out string) error
}

var contenders = []contender{
	{"rlpipe", ".parquet", runRlpipe},
	{"duckdb", ".parquet", runDuckDB},
	{"cpython", ".jsonl", runCPython},
}

// runRlpipe does what a rescoring does: load and compile the spec, read
// and index the prompts table while scoring the trajectories file.
func runRlpipe(ctx context.Context, d *dataset, out string) error {
	spec, err := rewards.LoadSpec(specPath)
	if err != nil {
		return err
	}
	prog, err := rewards.Compile(spec)
	if err != nil {
		return err
	}
	pf, psize, err := openSized(d.promptsTable)
	if err != nil {
		return err
	}
	defer pf.Close()
	// Read and indexed while the first row groups are decoded.
	prompts := prog.ReadPromptsAsync(ctx, pf, psize, "prompts")
	tf, tsize, err := openSized(d.trajectories)
	if err != nil {
		return err
	}
	defer tf.Close()
	wf, err := os.Create(out)
	if err != nil {
		return err
	}
	defer wf.Close()
	bw := bufio.NewWriterSize(wf, 1<<20)
	sum, err := prog.ScoreFile(ctx, bw, tf, tsize, &rewards.ScoreOptions{Name: "trajectories", Prompts: prompts})
	if err != nil {
		return err
	}
	if sum.Errors > 0 {
		return fmt.Errorf("rlpipe: %d rows failed, first: %v", sum.Errors, sum.FirstErrors[0])
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return wf.Close()
}

// duckQuery is rescore.sql for a data set and an output file.
func duckQuery(d *dataset, out string) string {
	return strings.NewReplacer("{{trajectories}}", d.trajectories, "{{prompts}}", d.promptsTable, "{{out}}", out).Replace(rescoreSQL)
}

// runDuckDB opens a fresh in-memory database (all cores, DuckDB's
// defaults) and runs rescore.sql.
func runDuckDB(ctx context.Context, d *dataset, out string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, duckQuery(d, out)); err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	return db.Close()
}

// runCPython runs reward.py in a fresh interpreter.
func runCPython(ctx context.Context, d *dataset, out string) error {
	cmd := exec.CommandContext(ctx, "python3", scriptPath, d.promptsJSONL, d.trajectoriesJSONL, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("python3 %s: %v\n%s", scriptPath, err, msg)
	}
	return nil
}

// timed runs c once and returns how long it took and the CPU time it
// used, this process's and its children's (the Python interpreter).
func timed(ctx context.Context, c contender, d *dataset, out string) (wall, cpu time.Duration, err error) {
	cpu0 := cpuTime()
	start := time.Now()
	err = c.run(ctx, d, out)
	return time.Since(start), cpuTime() - cpu0, err
}

// cpuTime is the user and system time of this process and its waited-for
// children.
func cpuTime() time.Duration {
	var t time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			t += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return t
}

// duckVersion and pythonVersion name the peers measured.
func duckVersion() string {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return "?"
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT version()").Scan(&v); err != nil {
		return "?"
	}
	return v
}

func pythonVersion() string {
	out, err := exec.Command("python3", "-c", "import platform; print(platform.python_implementation(), platform.python_version())").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// openSized opens path for reading and returns it with its size.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
