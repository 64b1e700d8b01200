package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/embedded"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// policyTokenEnv holds the bearer token `policy serve` requires when bound
// to an address other than loopback.
const policyTokenEnv = "RLPIPE_POLICY_TOKEN"

func newPolicyCommand(g *rootOptions) *cobra.Command {
	return newGroupCommand("policy", "serve, reproduce and export the embedded model",
		newPolicyServeCommand(g), newPolicyPretrainCommand(g), newPolicyExportCommand(g))
}

type policyServeOptions struct {
	addr  string
	model string
}

func (o *policyServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8000", "address to listen on; any address but loopback needs "+policyTokenEnv)
	fs.StringVar(&o.model, "model", embedded.ModelTinyArith, "tiny-arith (the shipped weights) or a .safetensors file")
}

func newPolicyServeCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "serve [--addr 127.0.0.1:PORT] [--model tiny-arith|FILE.safetensors]",
		Short: "serve the embedded model over the OpenAI API",
		Long: `Serve the embedded model behind the OpenAI-compatible endpoints a vLLM server
offers: /v1/completions, /v1/chat/completions, /v1/models, /v1/models/{id}, and vLLM's LoRA
hot-loading (/v1/load_lora_adapter, /v1/unload_lora_adapter, with PEFT adapter
directories this machine can read). A rollout stage pointed at it samples the
same text as the model in process, for the same seeds.

The server listens on loopback by default. Bound to any other address it
requires a bearer token, read from ` + policyTokenEnv + `; clients send it as
their API key. Stop it with Ctrl-C.`,
		Example: `  rlpipe policy serve
  rlpipe policy serve --addr 127.0.0.1:9000 --model weights.safetensors
  RLPIPE_POLICY_TOKEN=$(openssl rand -hex 16) rlpipe policy serve --addr 0.0.0.0:8000`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o policyServeOptions, _ []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return policyServe(ctx, o, g.env.getenv(policyTokenEnv), *zerolog.Ctx(cmd.Context()), g.printer(cmd))
	})
}

// policyServe serves until ctx ends.
func policyServe(ctx context.Context, o policyServeOptions, token string, log zerolog.Logger, p printer) error {
	m, err := embedded.Load(o.model)
	if err != nil {
		return failure(err)
	}
	srv, err := server.New(tiny.NewPolicy(m), &server.Options{Model: m.Version(), Addr: o.addr, Token: token, Logger: log})
	if err != nil {
		return failure(fmt.Errorf("policy serve: %w (set %s to a secret and send it as the API key)", err, policyTokenEnv))
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		return failure(fmt.Errorf("policy serve: %w", err))
	}
	if err := p.Printf("serving %s on http://%s (OpenAI API: /v1/completions, /v1/chat/completions, /v1/models)\n", m.Version(), l.Addr()); err != nil {
		l.Close()
		return err
	}
	return srv.Serve(ctx, l)
}

type policyPretrainOptions struct {
	model  string
	out    string
	steps  int
	seed   uint64
	verify bool
}

func (o *policyPretrainOptions) AddFlags(fs *pflag.FlagSet) {
	d := tiny.DefaultPretrainConfig()
	fs.StringVar(&o.model, "model", "tiny-arith", "the shipped model to reproduce: tiny-arith, tiny-chain (half of its examples two-turn running sums, for multi-turn episodes), tiny-rg (reasoning-gym's basic_arithmetic questions) or tiny-tool (Hermes tool-call episodes of examples/tools-demo)")
	fs.StringVar(&o.out, "out", "", "where to write the weights (default base.safetensors, chain.safetensors for tiny-chain, rg.safetensors for tiny-rg, tool.safetensors for tiny-tool)")
	fs.IntVar(&o.steps, "steps", 0, "training steps (0: the shipped model's, 2250 for tiny-arith, 4100 for tiny-chain, 1000 for tiny-rg, 1750 for tiny-tool)")
	fs.Uint64Var(&o.seed, "seed", d.Seed, "seed of the initial weights and the training problems")
	fs.BoolVar(&o.verify, "verify", false, "exit 1 unless the result equals the shipped weights byte for byte")
}

func newPolicyPretrainCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "pretrain [--model tiny-arith|tiny-chain|tiny-rg|tiny-tool] [--out FILE] [--steps N] [--seed S] [--verify]",
		Short: "reproduce the embedded model's shipped weights from scratch",
		Long: `Train the embedded model from random weights by supervised learning on
"a+b=" problems with operands 0–999, never on the held-out split, and write
the weights as safetensors (tiny-rg: on reasoning-gym's basic_arithmetic
questions of two one-digit terms, drawn by a Go port of its generator, never
on its held-out split; tiny-tool: on episodes of examples/tools-demo's tool
task, all 100 of its one-digit sums, whose held-out split is held out of the
demo's RL run only). With the default steps and seed the result is the
file the binary ships, byte for byte; --verify checks that. Training is
deterministic whatever the number of cores; it takes a few minutes on two.`,
		Example: `  rlpipe policy pretrain --verify
  rlpipe policy pretrain --model tiny-chain --verify
  rlpipe policy pretrain --model tiny-rg --verify
  rlpipe policy pretrain --model tiny-tool --verify
  rlpipe policy pretrain --seed 3 --out seed3.safetensors`,
		Args: exactArgs(),
	}, func(cmd *cobra.Command, o policyPretrainOptions, _ []string) error {
		return policyPretrain(cmd.Context(), o, g.printer(cmd))
	})
}

func policyPretrain(ctx context.Context, o policyPretrainOptions, p printer) error {
	cfg, shipped, out := tiny.DefaultPretrainConfig(), tiny.EmbeddedSHA256(), "base.safetensors"
	switch o.model {
	case "tiny-arith":
	case tiny.ModelTinyChain:
		cfg, shipped, out = tiny.DefaultChainPretrainConfig(), tiny.EmbeddedChainSHA256(), "chain.safetensors"
	case tiny.ModelTinyRG:
		cfg, shipped, out = tiny.DefaultRGPretrainConfig(), tiny.EmbeddedRGSHA256(), "rg.safetensors"
	case tiny.ModelTinyTool:
		cfg, shipped, out = tiny.DefaultToolPretrainConfig(), tiny.EmbeddedToolSHA256(), "tool.safetensors"
	default:
		return usagef("policy pretrain: --model %q: use tiny-arith, tiny-chain, tiny-rg or tiny-tool", o.model)
	}
	if o.out != "" {
		out = o.out
	}
	o.out = out
	if o.steps > 0 {
		cfg.Steps = o.steps
	}
	cfg.Seed = o.seed
	every := max(cfg.Steps/20, 1)
	m, err := tiny.Pretrain(ctx, cfg, func(pr tiny.PretrainProgress) {
		if pr.Step%every == 0 && !p.json {
			p.Printf("step %5d/%d  loss %.4f  %.0fs\n", pr.Step, cfg.Steps, pr.Loss, pr.Elapsed.Seconds())
		}
	})
	if err != nil {
		return failure(err)
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, b, 0o644); err != nil {
		return failure(fmt.Errorf("pretrain: %w", err))
	}
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:])
	// The held-out problems of the model's task: 500 additions, 500
	// basic_arithmetic questions for tiny-rg, the 26 tool episodes
	// examples/tools-demo holds out for tiny-tool (played in memory).
	var heldout float64
	problems := 500
	switch cfg.Family {
	case tiny.FamilyBasicArithmetic:
		heldout, err = m.RGGreedyAccuracy(ctx, nil, tiny.RGHeldOutProblems(500))
	case tiny.FamilyToolSum:
		held := tiny.ToolProblems(true)
		problems = len(held)
		var outs [][]tiny.ToolOutcome
		if outs, err = m.ToolPlay(ctx, nil, held, 1, 0, 1); err == nil {
			heldout = tiny.ToolSuccess(outs)
		}
	default:
		heldout, err = m.GreedyAccuracy(ctx, nil, tiny.HeldOutProblems(500))
	}
	if err != nil {
		return err
	}
	res := map[string]any{"out": o.out, "sha256": got, "version": m.Version(), "heldout_greedy_accuracy_500": heldout, "heldout_problems": problems,
		"shipped_sha256": shipped, "matches_shipped": got == shipped}
	if p.json {
		if err := p.JSON(res); err != nil {
			return err
		}
	} else {
		p.Printf("wrote %s (sha256 %s); greedy accuracy on %d held-out problems %.3f\n", o.out, got, problems, heldout)
		if got == shipped {
			p.Printf("identical to the shipped weights\n")
		}
	}
	if o.verify && got != shipped {
		return failure(fmt.Errorf("pretrain: %s differs from the shipped %s weights (sha256 %s): the training is not reproducible here; report it with `go version` and the machine", o.out, o.model, shipped))
	}
	return nil
}

type policyExportOptions struct {
	model        string
	adapter      string
	maxShardSize int64
}

func (o *policyExportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", embedded.ModelTinyArith, "tiny-arith, tiny-chain, tiny-rg, tiny-tool, a .safetensors file or a model directory")
	fs.StringVar(&o.adapter, "adapter", "", "a policy checkpoint of the model: a PEFT adapter, checked and copied to DIR/adapter, or a full fine-tune's weights, checked and written as DIR's model; a local directory, or REF:PATH in the store (a run's runs-RUN:iterations/NNNNNN/adapter)")
	fs.Int64Var(&o.maxShardSize, "max-shard-size", 0, "write the weights as shards of at most this many bytes and model.safetensors.index.json when they are larger (0: 2 GiB, transformers' default)")
}

func newPolicyExportCommand(g *rootOptions) *cobra.Command {
	return withOptions(&cobra.Command{
		Use:   "export DIR [--model tiny-arith|tiny-chain|tiny-rg|FILE] [--adapter REF:PATH|ADAPTER_DIR]",
		Short: "write the embedded model as a Hugging Face model directory",
		Long: `Write the embedded model as a Hugging Face model directory that transformers
(AutoModelForCausalLM, AutoTokenizer), PEFT and vLLM load as it is: config.json
(LlamaForCausalLM), model.safetensors, generation_config.json, tokenizer.json
(a WordLevel tokenizer, one token per character, BOS prepended) and
tokenizer_config.json (with a chat template that renders conversations as the
embedded policy does). The adapters a run commits are PEFT directories of
this model: load them with PeftModel.from_pretrained or vLLM's
/v1/load_lora_adapter. The embedded policy reads such a directory back
(policy: {model: DIR}).

--adapter takes the policy checkpoint directory of an iteration: a local
directory, or REF:PATH in the store: iteration N of run RUN committed it at
runs-RUN:iterations/NNNNNN/adapter. A local directory that exists wins over
a store path of the same spelling. A PEFT adapter is checked against the
model and copied to DIR/adapter; the full weights a trainer with lora: none
writes are checked (their shards against model.safetensors.index.json, their
shapes against the model) and DIR becomes that fine-tuned model.
--max-shard-size splits the weights written above that many bytes.`,
		Example: `  rlpipe policy export ./tiny-arith-hf
  rlpipe policy export ./chain-hf --model tiny-chain
  rlpipe policy export ./hf --adapter runs-arith:iterations/000060/adapter
  rlpipe policy export ./hf --adapter ./step-000003
  rlpipe policy export ./full-hf --adapter runs-full:iterations/000020/adapter`,
		Args: exactArgs("DIR"),
	}, func(cmd *cobra.Command, o policyExportOptions, args []string) error {
		if o.adapter == "" || isLocalDir(o.adapter) || !strings.Contains(o.adapter, ":") {
			return policyExport(cmd.Context(), args[0], o, g.printer(cmd))
		}
		return g.withStore(cmd, func(ctx context.Context, st artifacts.Store) error {
			tmp, err := os.MkdirTemp("", "rlpipe-adapter-")
			if err != nil {
				return failure(fmt.Errorf("policy export: %w", err))
			}
			defer os.RemoveAll(tmp)
			if err := checkoutAdapter(ctx, st, o.adapter, tmp); err != nil {
				return err
			}
			o.adapter = tmp
			return policyExport(ctx, args[0], o, g.printer(cmd))
		})
	})
}

// isLocalDir reports whether path is a directory on this machine.
func isLocalDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// checkoutAdapter copies the adapter directory at ref:path in the store
// into dir.
func checkoutAdapter(ctx context.Context, st artifacts.Store, arg, dir string) error {
	a, err := parseArtifact(arg)
	if err != nil {
		return usagef("policy export --adapter %s: %v: give a local directory or REF:PATH, e.g. %s:%s", arg, err, runs.Branch("arith"), runs.AdapterPath(60))
	}
	a.path = strings.TrimSuffix(a.path, "/") + "/"
	entries, err := listEntries(ctx, st, a.ref, a.path, true)
	if err != nil {
		return withOp(err, "policy export --adapter %s", arg)
	}
	if len(entries) == 0 {
		return failure(fmt.Errorf("policy export --adapter %s: %w: no directory %s at %s and none on this machine (`rlpipe ls %s:%s` lists a run's iterations)",
			arg, artifacts.ErrObjectNotFound, strings.TrimSuffix(a.path, "/"), a.ref, a.ref, runs.IterationsPrefix))
	}
	if _, err := exportPrefix(ctx, st, a, dir, formatRaw); err != nil {
		return withOp(err, "policy export --adapter %s", arg)
	}
	return nil
}

func policyExport(_ context.Context, dir string, o policyExportOptions, p printer) error {
	if o.maxShardSize < 0 {
		return usagef("policy export --max-shard-size %d: give a positive number of bytes, or 0 for 2 GiB", o.maxShardSize)
	}
	m, err := embedded.Load(o.model)
	if err != nil {
		return failure(err)
	}
	weights := false
	if o.adapter != "" {
		kind, err := policy.CheckpointKind(o.adapter)
		if err != nil {
			return failure(fmt.Errorf("policy export: %w", err))
		}
		weights = kind == policy.KindWeights
	}
	if weights {
		// A full fine-tune: DIR is the trained model, checked.
		if m, err = tiny.LoadWeightsDir(m, o.adapter); err != nil {
			return failure(fmt.Errorf("policy export: %w", err))
		}
	} else if o.adapter != "" {
		a, err := m.LoadAdapter(o.adapter)
		if err != nil {
			return failure(fmt.Errorf("policy export: %w", err))
		}
		if err := a.Save(filepath.Join(dir, "adapter")); err != nil {
			return failure(fmt.Errorf("policy export: %w", err))
		}
	}
	if err := m.ExportHFSharded(dir, o.maxShardSize); err != nil {
		return failure(fmt.Errorf("policy export: %w", err))
	}
	res := map[string]any{"dir": dir, "version": m.Version(), "architecture": "LlamaForCausalLM", "parameters": m.NumParams()}
	if weights {
		res["weights"] = true
	} else if o.adapter != "" {
		res["adapter"] = filepath.Join(dir, "adapter")
	}
	if p.json {
		return p.JSON(res)
	}
	p.Printf("wrote %s to %s (LlamaForCausalLM, %d parameters)\n", m.Version(), dir, m.NumParams())
	if weights {
		p.Printf("weights: the full fine-tune %s\n", o.adapter)
	} else if o.adapter != "" {
		p.Printf("adapter: %s\n", res["adapter"])
	}
	return nil
}
