// Command agent-sandbox runs an agentic RL rollout end to end: a policy
// works on a small world of files by calling a bash tool, each episode in
// its own copy-on-write workspace inside the bubblewrap sandbox; a
// verifier and a judge score the episodes; the trajectories and rewards
// tables are committed to the artifact store on a branch.
//
// By default the policy and the judge are a scripted STAND-IN served over
// the OpenAI API on loopback; --endpoint and --model point the same code
// at a real server (vLLM, SGLang, …). See README.md.
package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

//go:embed world tasks.jsonl
var embedded embed.FS

type config struct {
	Endpoint    string // "" starts the stand-in
	Model       string
	KeyEnv      string
	JudgeURL    string // "" uses the stand-in judge
	JudgeModel  string
	JudgeKeyEnv string
	Samples     int
	MaxTurns    int
	Concurrency int
	Timeout     time.Duration
	Temperature float64
	MaxTokens   int
	Seed        int64
	Store       string
	Branch      string
	WorldCache  string
	World       string // "" uses the embedded world/
	Tasks       string // "" uses the embedded tasks.jsonl
}

func (c *config) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "endpoint", "", "OpenAI-compatible policy server, e.g. http://gpu-host:8000 (default: start the scripted STAND-IN on 127.0.0.1:0)")
	fs.StringVar(&c.Model, "model", "", "model name the server serves (default: "+standinModel+" for the stand-in)")
	fs.StringVar(&c.KeyEnv, "key-env", "", "environment variable holding the policy server's API key (never printed)")
	fs.StringVar(&c.JudgeURL, "judge-endpoint", "", "OpenAI-compatible judge API root, e.g. http://gpu-host:8000/v1 (default: the STAND-IN judge)")
	fs.StringVar(&c.JudgeModel, "judge-model", "", "judge model (default: --model)")
	fs.StringVar(&c.JudgeKeyEnv, "judge-key-env", "", "environment variable holding the judge's API key (default: --key-env)")
	fs.IntVar(&c.Samples, "samples", 4, "episodes per task (the group size G)")
	fs.IntVar(&c.MaxTurns, "max-turns", 8, "policy replies per episode before it is truncated")
	fs.IntVar(&c.Concurrency, "concurrency", 4, "episodes in flight")
	fs.DurationVar(&c.Timeout, "episode-timeout", 5*time.Minute, "wall-clock budget of an episode")
	fs.Float64Var(&c.Temperature, "temperature", 1, "sampling temperature")
	fs.IntVar(&c.MaxTokens, "max-tokens", 1024, "tokens per reply")
	fs.Int64Var(&c.Seed, "seed", 1, "run seed; every turn's sampling seed derives from it")
	fs.StringVar(&c.Store, "store", "./.rlpipe-agent", "embedded artifact store (created when missing)")
	fs.StringVar(&c.Branch, "branch", "agent-demo", "store branch to commit the tables to")
	fs.StringVar(&c.WorldCache, "world-cache", defaultWorldCache(), "directory of built worlds")
	fs.StringVar(&c.World, "world", "", "world directory (default: the world/ built into this binary)")
	fs.StringVar(&c.Tasks, "tasks", "", "tasks JSONL file (default: the tasks.jsonl built into this binary)")
}

func defaultWorldCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "rlpipe", "worlds")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		err = serveMain(ctx, os.Args[2:], os.Stdout)
	} else {
		var cfg config
		fs := flag.NewFlagSet("agent-sandbox", flag.ExitOnError)
		cfg.addFlags(fs)
		fs.Parse(os.Args[1:])
		_, err = run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-sandbox:", err)
		stop()
		os.Exit(1)
	}
}

// DefaultServeAddr is where `agent-sandbox serve` listens, and what
// pipeline.yaml's policy endpoint and reward.yaml's judge name.
const DefaultServeAddr = "127.0.0.1:8642"

// serveMain serves the STAND-IN policy and judge until ctx ends, for
// `rlpipe run -f examples/agent-sandbox/pipeline.yaml`.
func serveMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agent-sandbox serve", flag.ContinueOnError)
	addr := fs.String("addr", DefaultServeAddr, "loopback address to serve on")
	tasksFile := fs.String("tasks", "", "tasks JSONL file the stand-in plays (default: the tasks.jsonl built into this binary)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tasks, err := loadTasks(*tasksFile)
	if err != nil {
		return err
	}
	base, stopServe, err := serveStandin(&standin{tasks: tasks}, *addr)
	if err != nil {
		return err
	}
	printf(out, "policy %s/v1  model %s  [STAND-IN: a scripted agent, not a model]\n", base, standinModel)
	printf(out, "judge  %s/judge/v1  [STAND-IN: a rule, not a model]\n", base)
	<-ctx.Done()
	return stopServe()
}

// printf writes to the run's output; a failed write is not worth failing
// the run for.
func printf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }
