package external

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		says string // "" for valid
	}{
		{"valid", Options{Command: []string{"python3", "t.py"}, Hyperparameters: map[string]any{"no_std": true}}, ""},
		{"no command", Options{}, "command is empty"},
		{"empty program", Options{Command: []string{""}}, "command is empty"},
		{"bad env name", Options{Command: []string{"x"}, Env: map[string]string{"A=B": "1"}}, `"A=B" is not valid`},
		{"no_std not bool", Options{Command: []string{"x"}, Hyperparameters: map[string]any{"no_std": "yes"}}, "hyperparameters.no_std is yes (string)"},
		{"not JSON", Options{Command: []string{"x"}, Hyperparameters: map[string]any{"lr": math.NaN()}}, "not a JSON object"},
		{"negative timeout", Options{Command: []string{"x"}, Timeout: -1}, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.says == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want ErrOptions saying %q", err, tc.says)
			}
		})
	}
}

// The version digests what changes training, and not the environment.
func TestTaskVersion(t *testing.T) {
	version := func(o Options) string {
		t.Helper()
		v, err := o.TaskVersion()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := Options{Command: []string{"python3", "t.py"}, Hyperparameters: map[string]any{"lr": 1e-5}}
	v := version(base)
	withEnv := base
	withEnv.Env = map[string]string{"HF_TOKEN": "x"}
	if version(withEnv) != v {
		t.Error("the environment changed the version")
	}
	for _, o := range []Options{
		{Command: []string{"python3", "u.py"}, Hyperparameters: base.Hyperparameters},
		{Command: base.Command, Hyperparameters: map[string]any{"lr": 2e-5}},
		{Command: base.Command, Hyperparameters: base.Hyperparameters, Version: "2"},
	} {
		if version(o) == v {
			t.Errorf("%+v has the same version as %+v", o, base)
		}
	}
	_, err := Options{Command: base.Command, Hyperparameters: map[string]any{"lr": math.NaN()}}.TaskVersion()
	if want := "train task version: encode the command and hyperparameters: json: unsupported value: NaN"; err == nil || err.Error() != want {
		t.Errorf("version with a NaN lr: error %v, want %q", err, want)
	}
}

func TestSecretKey(t *testing.T) {
	for k, want := range map[string]bool{"HF_TOKEN": true, "WANDB_API_KEY": true, "AWS_SECRET_ACCESS_KEY": true, "DB_PASSWORD": true,
		"GITHUB_PAT": true, "MAX_TOKENS": false, "CUDA_VISIBLE_DEVICES": false, "HF_HOME": false, "TOKENIZERS_PARALLELISM": false} {
		if secretKey(k) != want {
			t.Errorf("secretKey(%s) = %v", k, !want)
		}
	}
}

func TestStreamLinesTailAndRedaction(t *testing.T) {
	var logs strings.Builder
	s := &stream{name: "stderr", log: zerolog.New(&logs), redact: redactor([]string{"HF_TOKEN=hf_abcdef", "SHORT_TOKEN=ab", "HOME=/root"})}
	for _, chunk := range []string{"step 1\rstep", " 2\n", "token hf_abcdef ab\n", "last line without newline"} {
		s.Write([]byte(chunk))
	}
	s.flush()
	got := s.tail(func(s string) string { return s })
	want := "step 1\nstep 2\ntoken <redacted> ab\nlast line without newline"
	if got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
	if strings.Contains(logs.String(), "hf_abcdef") || strings.Count(logs.String(), `"stream":"stderr"`) != 4 {
		t.Errorf("log:\n%s", logs.String())
	}
	var long stream
	long.log, long.redact = zerolog.Nop(), func(s string) string { return s }
	for i := 0; i < 1000; i++ {
		long.Write([]byte(strings.Repeat("x", 100) + "\n"))
	}
	if n := strings.Count(long.tail(func(s string) string { return s }), "\n") + 1; n != tailLines {
		t.Errorf("tail of a long output has %d lines, want %d", n, tailLines)
	}
}

func TestFirstNonFinite(t *testing.T) {
	f64 := func(v ...float64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		return b
	}
	// bfloat16 1.0 = 0x3f80, NaN = 0x7fc0; float16 1.0 = 0x3c00, +Inf = 0x7c00.
	for _, c := range []struct {
		name   string
		tensor safetensors.Tensor
		at     int
		finite bool
	}{
		{"F32 -inf", safetensors.FromFloat32([]int{3}, []float32{1, float32(math.Inf(-1)), 2}), 1, false},
		{"BF16 NaN", safetensors.Tensor{DType: safetensors.BF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0xc0, 0x7f}}, 1, false},
		{"F16 ones", safetensors.Tensor{DType: safetensors.F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0x3c}}, 0, true},
		{"F16 inf", safetensors.Tensor{DType: safetensors.F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0x7c}}, 1, false},
		{"F64 finite", safetensors.Tensor{DType: safetensors.F64, Shape: []int{2}, Data: f64(1, -2.5)}, 0, true},
		{"F64 NaN", safetensors.Tensor{DType: safetensors.F64, Shape: []int{3}, Data: f64(1, 2, math.NaN())}, 2, false},
		{"I64 is not a float", safetensors.Tensor{DType: safetensors.I64, Shape: []int{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x7f}}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if i, ok := firstNonFinite(c.tensor); ok != c.finite || i != c.at {
				t.Errorf("firstNonFinite = %d, %v; want %d, %v", i, ok, c.at, c.finite)
			}
		})
	}
}

func TestReadAndMergeMetrics(t *testing.T) {
	dir := t.TempDir()
	for body, says := range map[string]string{
		`[1, 2]`:                               "is not a JSON object",
		`null`:                                 "null is not an object",
		`{"loss": NaN}`:                        "write null",
		`{"a": 1} {"b": 2}`:                    "more than one JSON value",
		`{"loss": 0.5, "reward": {"mean": 9}}`: "",
	} {
		p := filepath.Join(dir, "m.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := readMetrics(p)
		if says != "" {
			if !errors.Is(err, ErrContract) || !strings.Contains(err.Error(), says) {
				t.Errorf("%s: err = %v, want %q", body, err, says)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := mergeMetrics(Metrics{Iteration: 4, Figures: grpo.Figures{Samples: 8, Reward: grpo.Summary{Count: 8, Mean: 0.5}}}, m)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out["loss"] != 0.5 || out["iteration"] != 4.0 || out["samples"] != 8.0 || out["reward"].(map[string]any)["mean"] != 9.0 {
			t.Errorf("merged: %s", b)
		}
	}
	if _, err := readMetrics(filepath.Join(dir, "absent.json")); !errors.Is(err, ErrContract) || !strings.Contains(err.Error(), "without writing --metrics-out") {
		t.Errorf("absent: %v", err)
	}
}

func TestPrepareMasks(t *testing.T) {
	ok := tables.StatusOK
	errMsg := "boom"
	traj := func(p string, i int32, status string, toks ...int32) tables.Trajectory {
		return tables.Trajectory{PromptID: p, SampleIndex: i, Status: status, TokenIDs: toks, NumTokens: int32(len(toks)), FinishReason: "stop"}
	}
	rew := func(p string, i int32, v float64) tables.Reward {
		return tables.Reward{PromptID: p, SampleIndex: i, Total: v, Status: ok, Components: map[string]float64{"correct": v}}
	}
	prompts := []tables.Prompt{{PromptID: "a"}, {PromptID: "b"}, {PromptID: "c"}}
	trajs := []tables.Trajectory{
		traj("b", 1, ok, 5), traj("b", 0, ok, 5), // equal rewards
		traj("a", 2, tables.StatusTimeout), traj("a", 1, ok, 7, 8), traj("a", 0, ok, 9),
		traj("c", 0, ok), traj("c", 1, ok, 4), traj("c", 2, ok, 4),
	}
	rewards := []tables.Reward{rew("a", 0, 1), rew("a", 1, 0), {PromptID: "a", SampleIndex: 2, Status: "timeout", Error: &errMsg},
		rew("b", 0, 1), rew("b", 1, 1), rew("c", 0, 1), rew("c", 1, 0)}
	adv, m, err := prepare(prompts, trajs, rewards, nil, advantages.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range adv {
		s := a.PromptID + string(rune('0'+a.SampleIndex))
		if a.Mask {
			s += ":" + a.Reason
		}
		got = append(got, s)
	}
	want := "a0 a1 a2:trajectory status timeout b0:zero reward variance b1:zero reward variance c0:no token ids c1 c2:no reward"
	if strings.Join(got, " ") != want {
		t.Errorf("advantages\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if m.Samples != 8 || m.Used != 3 || m.Masked != 5 || m.Errored != 2 || m.Groups != 3 || m.ZeroStdGroups != 1 || m.Reward.Count != 6 {
		t.Errorf("metrics %+v", m)
	}
	if _, _, err := prepare(prompts[:1], trajs, rewards, nil, advantages.TrainOptions{}); !errors.Is(err, ErrBatch) {
		t.Errorf("a sample without its prompt: %v", err)
	}
	if _, _, err := prepare(prompts, trajs, append(rewards, rew("z", 0, 1)), nil, advantages.TrainOptions{}); !errors.Is(err, ErrBatch) {
		t.Errorf("a reward without its sample: %v", err)
	}
}

// A policy without optimizer state yields --adapter-in only, and an
// empty --optimizer-out yields an adapter output without optimizer/.
func TestLayoutWithoutOptimizerState(t *testing.T) {
	work := t.TempDir()
	policy := filepath.Join(work, "in", "policy")
	cfg := safetensors.NewAdapterConfig("m", 2, 4, []string{"q_proj"})
	mods := map[string]safetensors.LoRA{"layers.0.q_proj": {
		A: safetensors.FromFloat32([]int{2, 3}, make([]float32, 6)), B: safetensors.FromFloat32([]int{4, 2}, make([]float32, 8))}}
	if err := safetensors.WriteAdapterDir(policy, cfg, mods); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(policy, OptimizerDir), 0o755); err != nil { // empty: no state
		t.Fatal(err)
	}
	dir := filepath.Join(work, "trainer")
	p := newPaths(dir)
	if err := p.splitPolicy(policy, dir); err != nil {
		t.Fatal(err)
	}
	if p.AdapterIn == "" || p.OptimizerIn != "" {
		t.Fatalf("adapter in %q, optimizer in %q", p.AdapterIn, p.OptimizerIn)
	}
	flags := strings.Join(p.flags(2, 9), " ")
	if !strings.Contains(flags, "--adapter-in "+p.AdapterIn) || strings.Contains(flags, "--optimizer-in") || !strings.HasSuffix(flags, "--iteration 2 --seed 9") {
		t.Errorf("flags: %s", flags)
	}
	for _, d := range []string{p.AdapterOut, p.OptimizerOut} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.WriteAdapterDir(p.AdapterOut, cfg, mods); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.MetricsOut, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.checkOutputs(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out", "adapter")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.assemble(out); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "adapter_config.json adapter_model.safetensors" {
		t.Errorf("adapter output: %v", names)
	}

	// A policy that is not an adapter is refused before the trainer runs.
	bad := filepath.Join(work, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bad, "adapter_model.json"), []byte("{}"), 0o644)
	q := newPaths(filepath.Join(work, "t2"))
	if err := q.splitPolicy(bad, filepath.Join(work, "t2")); !errors.Is(err, ErrPolicy) {
		t.Errorf("err = %v, want ErrPolicy", err)
	}
}

func TestCheckOutputsNamesTheProblem(t *testing.T) {
	cfg := safetensors.NewAdapterConfig("m", 2, 4, []string{"q_proj"})
	mods := map[string]safetensors.LoRA{"layers.0.q_proj": {
		A: safetensors.FromFloat32([]int{2, 3}, make([]float32, 6)), B: safetensors.FromFloat32([]int{4, 2}, make([]float32, 8))}}
	for _, tc := range []struct {
		name  string
		setup func(p paths)
		says  string
	}{
		{"bin instead of safetensors", func(p paths) {
			os.Remove(filepath.Join(p.AdapterOut, safetensors.AdapterWeightsFile))
			os.WriteFile(filepath.Join(p.AdapterOut, "adapter_model.bin"), []byte("x"), 0o644)
		}, "safe_serialization=True"},
		{"optimizer inside the adapter", func(p paths) { os.MkdirAll(filepath.Join(p.AdapterOut, OptimizerDir), 0o755) }, "reserves"},
		{"optimizer-out replaced by a file", func(p paths) {
			os.RemoveAll(p.OptimizerOut)
			os.WriteFile(p.OptimizerOut, []byte("x"), 0o644)
		}, "is a file"},
		{"optimizer-out removed", func(p paths) { os.RemoveAll(p.OptimizerOut) }, "is gone"},
		{"no tensors", func(p paths) {
			os.RemoveAll(p.AdapterOut)
			safetensors.WriteAdapterDir(p.AdapterOut, cfg, nil)
		}, "holds no LoRA tensors"},
		{"not LoRA", func(p paths) {
			os.WriteFile(filepath.Join(p.AdapterOut, safetensors.AdapterConfigFile), []byte(`{"peft_type": "IA3", "r": 2}`), 0o644)
		}, `peft_type is "IA3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPaths(t.TempDir())
			os.MkdirAll(p.OptimizerOut, 0o755)
			if err := safetensors.WriteAdapterDir(p.AdapterOut, cfg, mods); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(p.MetricsOut, []byte(`{}`), 0o644)
			tc.setup(p)
			_, err := p.checkOutputs()
			if !errors.Is(err, ErrContract) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want ErrContract saying %q", err, tc.says)
			}
		})
	}
}

// TestParseTorchrun reads torchrun's report of a failed job: the rank it
// blames, how that rank ended, its traceback and its own last lines; and
// the worker's status, not torchrun's 1, decides whether to retry.
func TestParseTorchrun(t *testing.T) {
	sigkill, err := os.ReadFile(filepath.Join("testdata", "torchrun-sigkill.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// A worker that exited 78 with a recorded Python traceback.
	config := strings.Join([]string{
		"[rank0]: grpo_train: hyperparameters.lr: -1 must be > 0",
		"[rank1]: grpo_train: hyperparameters.lr: -1 must be > 0",
		"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
		"============================================================",
		"grpo_train.py FAILED",
		"------------------------------------------------------------",
		"Root Cause (first observed failure):",
		"[0]:",
		"  time      : 2026-12-05_07:40:01",
		"  host      : gpu-001",
		"  rank      : 3 (local_rank: 1)",
		"  exitcode  : 78 (pid: 4242)",
		"  error_file: /tmp/torchelastic_x/error.json",
		"  traceback : Traceback (most recent call last):",
		`    File "grpo_train.py", line 9, in main`,
		"      raise ValueError(\"boom\")",
		"  ValueError: boom",
		"============================================================",
	}, "\n")
	for _, c := range []struct {
		name      string
		out       string
		want      *RankFailure
		permanent bool
	}{
		{"sigkill", string(sigkill), &RankFailure{Rank: 1, LocalRank: 1, ExitCode: -9, Signal: "SIGKILL", PID: 15326, Host: "localhost",
			Traceback: "Signal 9 (SIGKILL) received by PID 15326",
			Output:    "grpo_train: rank 1 of 2 (cpu): 12 samples, iteration 1; loading /models/tiny-arith (float32)"}, false},
		// The two ranks' writes ended without a newline and share a line,
		// as torchrun printed them in a run of TestTorchrunRankDies.
		{"ranks on one line", strings.Replace(string(sigkill), "(float32)\n[rank1]:", "(float32)[rank1]:", 1), &RankFailure{Rank: 1, LocalRank: 1, ExitCode: -9, Signal: "SIGKILL", PID: 15326, Host: "localhost",
			Traceback: "Signal 9 (SIGKILL) received by PID 15326",
			Output:    "grpo_train: rank 1 of 2 (cpu): 12 samples, iteration 1; loading /models/tiny-arith (float32)"}, false},
		{"config", config, &RankFailure{Rank: 3, LocalRank: 1, ExitCode: 78, PID: 4242, Host: "gpu-001",
			Traceback: "Traceback (most recent call last):\n    File \"grpo_train.py\", line 9, in main\n      raise ValueError(\"boom\")\n  ValueError: boom"}, true},
		{"not torchrun", "Traceback (most recent call last):\nValueError: boom\n", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ranks := rankTails{}
			for _, l := range strings.Split(c.out, "\n") {
				ranks.add(l)
			}
			got := parseTorchrun(c.out, ranks)
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Fatalf("parseTorchrun = %+v, want %+v", got, c.want)
			}
			ee := &ExitError{Command: []string{"torchrun", "grpo_train.py"}, Code: 1, Rank: got}
			if ee.Permanent() != c.permanent {
				t.Errorf("Permanent() = %v, want %v", ee.Permanent(), c.permanent)
			}
			if got != nil && !strings.Contains(ee.Error(), got.String()) {
				t.Errorf("error %q does not name the rank", ee.Error())
			}
		})
	}
	if tail := trimLauncher(string(sigkill)); strings.Contains(tail, "launch_agent") || !strings.Contains(tail, "Root Cause") || !strings.Contains(tail, "[rank1]:") {
		t.Errorf("trimLauncher kept torchrun's own traceback or dropped the report:\n%s", tail)
	}
}
