"""TRL's GRPOTrainer on the exported tiny-arith, as rlpipe's arithmetic demo trains it.

BenchmarkTRLvsRlpipe (bench/trl) runs this once per seed, interleaved with
`rlpipe run` of the same configuration, and evaluates the adapter it saves
with rlpipe's own evaluator (tiny.ExactPass): the same held-out set, the
same exact pass@1 for both.

    python trl_grpo.py --model DIR --train train.jsonl --out DIR \
        --seed 1 --steps 20 --prompts 16 --group 8 --lr 2e-3 \
        --temperature 1.0 --max-tokens 5 --rank 8 --alpha 16

The configuration is the demo's (examples/arithmetic/pipeline.yaml with
overlap off, trainers/embedded's defaults): 16 prompts × 8 completions
of at most 5 tokens at temperature 1 a step, one AdamW step (constant
learning rate, no warm-up, no weight decay, gradient norm clipped at 1)
on the whole batch, the clipped surrogate with ε 0.2 averaged over the
batch's tokens (TRL's "dapo" loss, rlpipe's token mean), β 0, group
advantages divided by the group's std, LoRA of rank 8, α 16 on every
linear layer, float32 on the CPU. The reward is the demo's: 1 when the
completion is exactly the answer.

It writes to --out: adapter/ (PEFT's save_pretrained) and result.json:
the seconds between the ends of consecutive steps (everything a step
does: generation, reward, the update, TRL's logging), the CPU seconds of
the same spans (time.process_time: user and system time of every thread
of this process), the mean reward of each step, and the seconds spent before the first step (imports, model
load, trainer setup).
"""

import argparse
import json
import os
import time

T0 = time.perf_counter()

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from peft import LoraConfig  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def exact_match(completions, answer, **_):
    """The demo's reward (examples/arithmetic/reward.yaml): completion == answer."""
    return [1.0 if c == a else 0.0 for c, a in zip(completions, answer)]


class StepClock(TrainerCallback):
    """Records when each optimizer step ends and the rewards TRL logs."""

    def __init__(self):
        self.ends = []
        self.cpu_ends = []
        self.rewards = []
        self.first_begin = None
        self.first_cpu = None

    def on_step_begin(self, args, state, control, **kw):
        if self.first_begin is None:
            self.first_begin = time.perf_counter()
            self.first_cpu = time.process_time()

    def on_step_end(self, args, state, control, **kw):
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())

    def on_log(self, args, state, control, logs=None, **kw):
        if logs and "reward" in logs:
            self.rewards.append(float(logs["reward"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="the exported tiny-arith (rlpipe policy export)")
    ap.add_argument("--train", required=True, help="JSONL with prompt and answer per line")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=16, help="prompts a step")
    ap.add_argument("--group", type=int, default=8, help="completions a prompt")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=5)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    a = ap.parse_args()

    rows = [json.loads(line) for line in open(a.train)]
    ds = Dataset.from_dict({"prompt": [r["prompt"] for r in rows], "answer": [r["answer"] for r in rows]})
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    cfg = GRPOConfig(
        output_dir=os.path.join(a.out, "trainer"),
        seed=a.seed,
        data_seed=a.seed,
        max_steps=a.steps,
        learning_rate=a.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        per_device_train_batch_size=a.prompts * a.group,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=a.group,
        num_iterations=1,
        max_completion_length=a.max_tokens,
        temperature=a.temperature,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_vllm=False,
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=exact_match,
        args=cfg,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[clock],
        peft_config=LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=LINEARS, task_type="CAUSAL_LM"),
    )
    trainer.train()
    adapter = os.path.join(a.out, "adapter")
    trainer.model.save_pretrained(adapter)
    starts = [clock.first_begin] + clock.ends[:-1]
    cpu_starts = [clock.first_cpu] + clock.cpu_ends[:-1]
    result = {
        "setup_seconds": clock.first_begin - T0,
        "step_seconds": [e - s for s, e in zip(starts, clock.ends)],
        "step_cpu_seconds": [e - s for s, e in zip(cpu_starts, clock.cpu_ends)],
        "rewards": clock.rewards,
        "torch_threads": torch.get_num_threads(),
    }
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
