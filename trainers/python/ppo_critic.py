"""PPO's critic for grpo_train.py: a second LoRA adapter plus a value head
on the same frozen base model, GAE, and the clipped value loss.

grpo_train.py uses this module when the hyperparameters have `critic`
(docs/TRAINERS.md, "PPO with a critic"):

  * the critic is a PEFT adapter named "critic" beside the actor's
    ("default") on the one PeftModel, with the actor's rank, alpha and
    targets, and a value head Linear(hidden, 1) (float32, weight and bias
    zero on a fresh critic) on `output_hidden_states`' last hidden state,
    which HF Llama-style models take after the final norm. V_t of
    completion token t is the head's output at the position that predicts
    t (verl: `values = output[:, -response_length - 1:-1]`). Only the
    active adapter takes part in a forward pass, so the actor's forward
    passes never see the critic's factors and the base stays frozen and
    shared;
  * before any step (`prepare`) it scores the batch with the critic (the
    old values), builds the per-token rewards (0 but the row's reward on the
    last trainable token, minus beta·k1 per trainable token with
    kl_in_reward), runs GAE over the trainable tokens and whitens the
    advantages over the whole batch — the functions below restate verl's
    `compute_gae_advantage_return` and `masked_whiten` in torch, float64;
    under torchrun every process gathers every row first, so the
    statistics are the whole batch's on every rank;
  * on each of the actor's minibatches (`step`) it takes one AdamW step on
    verl's `compute_value_loss`, 0.5·agg(max((V−R)², (clip(V, V_old±c)−R)²)),
    with the actor's aggregation, betas, weight decay and gradient clip; its
    gradient is summed over the processes by hand (the critic is not under
    DDP);
  * `save` writes the critic's PEFT files, value_head.safetensors and its
    AdamW state (optimizer.pt) to --critic-out, and `write_values` the
    per-token figures to --values-out as JSON lines.

Nothing here imports torch at module level, so grpo_train.py checks the
hyperparameters before torch loads.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import tempfile
from typing import Any

ACTOR = "default"  # PEFT's name for the actor's adapter
CRITIC = "critic"
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
HEAD_FILE = "value_head.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
STATE_FORMAT = "rlpipe-ppo-critic-torch/1"

# The keys of hyperparameters.critic and their defaults; lr None means
# the actor's. gamma and lambda are the advantages section's (rlpipe
# writes them here for the external trainer).
DEFAULTS: dict[str, Any] = {
    "lr": None,
    "warmup": 0,
    "cliprange_value": 0.5,
    "missing": "refuse",
    "gamma": 1.0,
    "lambda": 1.0,
}


class CriticError(Exception):
    """A batch or a critic state the critic cannot train on (exit 65)."""


def row_name(s: dict) -> str:
    return f"sample {s['sample_index']} of prompt {s['prompt_id']!r}"


# ------------------------------------------------------------ the algorithm


def token_rewards(s: dict, beta: float, kl_in_reward: bool) -> list[float]:
    """The per-token rewards of a sample's completion: its reward (under the
    gae estimator, the advantages table's advantage column holds the row's
    outcome reward) on the last trainable token, 0 elsewhere, and with kl_in_reward −beta·k1 on every
    trainable token, k1 = logπ_old − logπ_ref (verl's apply_kl_penalty with
    kl_penalty "kl")."""
    mask = s["mask"]
    r = [0.0] * len(mask)
    r[max(j for j, m in enumerate(mask) if m)] = s["advantage"]
    if kl_in_reward and beta > 0:
        for j, m in enumerate(mask):
            if m:
                r[j] -= beta * (s["old"][j] - s["ref"][j])
    return r


def gae(rewards, values, mask, gamma: float, lam: float):
    """verl's compute_gae_advantage_return on [batch, length] tensors:
    advantages and returns, with V_{t+1} and the running advantage carried
    across masked (observation) tokens. Returns (advantages, returns), the
    advantages not yet whitened."""
    import torch

    nextvalues = torch.zeros_like(values[:, 0])
    lastgaelam = torch.zeros_like(values[:, 0])
    out = [None] * values.shape[1]
    for t in reversed(range(values.shape[1])):
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        running = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = running * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        out[t] = lastgaelam
    adv = torch.stack(out, dim=1)
    return adv, adv + values


def masked_mean(x, mask):
    return (x * mask).sum() / (mask.sum() + 1e-8)


def masked_whiten(x, mask):
    """verl's masked_whiten (shift_mean=True): (x − mean)/sqrt(var + 1e-8)
    with the unbiased variance over the masked elements."""
    import torch

    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    n = mask.sum()
    var = var * n / (n - 1)
    return (x - mean) * torch.rsqrt(var + 1e-8)


def explained_variance(values: list[float], returns: list[float]) -> float | None:
    """1 − Var(R − V)/Var(R) over the trainable tokens; None when the returns
    do not vary."""
    n = len(returns)
    if n < 2:
        return None

    def var(xs):
        m = sum(xs) / n
        return sum((x - m) ** 2 for x in xs) / (n - 1)

    vr = var(returns)
    if vr == 0:
        return None
    return 1 - var([r - v for r, v in zip(returns, values)]) / vr


def value_loss_terms(vpred, old, ret, cliprange: float):
    """verl's compute_value_loss before aggregation: the per-token
    max((V−R)², (clip(V, V_old±c)−R)²) and whether the clipped one won."""
    import torch

    clipped = torch.max(torch.min(vpred, old + cliprange), old - cliprange)
    l1 = (vpred - ret) ** 2
    l2 = (clipped - ret) ** 2
    return torch.max(l1, l2), l2 > l1


# ------------------------------------------------------------ the critic


def pad(batch: list[dict], pad_id: int):
    """input ids and attention mask of prompt + completion, right-padded."""
    import torch

    length = max(len(s["prompt"]) + len(s["completion"]) for s in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    att = torch.zeros((len(batch), length), dtype=torch.long)
    for i, s in enumerate(batch):
        seq = s["prompt"] + s["completion"]
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        att[i, : len(seq)] = 1
    return ids, att


def read_state(path: str | None) -> dict[str, bytes] | None:
    """The files of a --critic-in directory, or None without one."""
    if not path:
        return None
    files = {}
    for name in PEFT_FILES + (HEAD_FILE,):
        p = os.path.join(path, name)
        try:
            with open(p, "rb") as f:
                files[name] = f.read()
        except OSError as e:
            raise CriticError(f"read the critic state --critic-in {path}: {name}: {e.strerror or e}; "
                              "a critic directory holds adapter_config.json, adapter_model.safetensors and "
                              f"{HEAD_FILE}") from e
    p = os.path.join(path, OPTIMIZER_FILE)
    if os.path.exists(p):
        with open(p, "rb") as f:
            files[OPTIMIZER_FILE] = f.read()
    return files


class Critic:
    """The critic of one train call, on every process."""

    def __init__(self, peft_model, hp: dict, d, io_rank: int, critic_in: str | None, pad_id: int, log):
        import torch
        from peft import LoraConfig

        self.peft, self.hp, self.c, self.d, self.pad_id, self.log = peft_model, hp, hp["critic"], d, pad_id, log
        files = None
        if d.rank == io_rank:
            try:
                files = {"ok": read_state(critic_in)}
            except CriticError as e:
                files = {"error": str(e)}
        files = d.broadcast(files, io_rank)
        if "error" in files:
            raise CriticError(files["error"])
        files = files["ok"]
        hidden = peft_model.get_base_model().config.hidden_size
        self.head = torch.nn.Linear(hidden, 1, dtype=torch.float32).to(d.device)
        if files is None:
            a = peft_model.peft_config[ACTOR]
            peft_model.add_adapter(CRITIC, LoraConfig(
                r=a.r, lora_alpha=a.lora_alpha, lora_dropout=a.lora_dropout,
                target_modules=sorted(a.target_modules) if isinstance(a.target_modules, (set, list)) else a.target_modules,
                bias="none", task_type="CAUSAL_LM",
            ))
            with torch.no_grad():
                self.head.weight.zero_()
                self.head.bias.zero_()
            log("a fresh critic starts (no --critic-in): LoRA B and the value head at zero")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                for name in PEFT_FILES:
                    with open(os.path.join(tmp, name), "wb") as f:
                        f.write(files[name])
                peft_model.load_adapter(tmp, adapter_name=CRITIC, is_trainable=True)
            self._load_head(files[HEAD_FILE], critic_in, hidden)
        # Adding or loading an adapter may leave it frozen; the actor's
        # stays as it was.
        self.lora = sorted(((n, p) for n, p in peft_model.named_parameters() if f".{CRITIC}." in n and "lora_" in n),
                           key=lambda x: x[0])
        if not self.lora:
            raise CriticError("the critic's adapter has no LoRA factors on this model")
        for _, p in self.lora:
            p.requires_grad_(True)
        self.names = [n for n, _ in self.lora] + ["v_head.weight", "v_head.bias"]
        self.params = [p for _, p in self.lora] + [self.head.weight, self.head.bias]
        if d.dist is not None:
            for p in self.params:  # the I/O rank's critic everywhere
                d.dist.broadcast(p.data, src=io_rank)
        lr = self.c["lr"] if self.c["lr"] is not None else hp["lr"]
        self.opt = torch.optim.AdamW(self.params, lr=lr, betas=tuple(hp["betas"]), weight_decay=hp["weight_decay"])
        self.steps_before, self.updates_before = 0, 0
        if files is not None and OPTIMIZER_FILE in files:
            state = torch.load(io.BytesIO(files[OPTIMIZER_FILE]), map_location="cpu", weights_only=True)
            if state.get("param_names") == self.names:
                self.opt.load_state_dict(state["optimizer"])
                for g in self.opt.param_groups:  # this call's hyperparameters win
                    g.update(lr=lr, betas=tuple(hp["betas"]), weight_decay=hp["weight_decay"])
                self.steps_before = int(state.get("optimizer_steps", 0))
                self.updates_before = int(state.get("updates", 0))
            else:
                log("the critic's optimizer state does not match its parameters; its AdamW starts fresh")
        elif files is not None:
            log(f"--critic-in holds no {OPTIMIZER_FILE} (another trainer wrote it?); the critic's AdamW starts fresh")
        self.steps = 0
        self.figures: dict[str, Any] = {}

    def _load_head(self, data: bytes, where: str, hidden: int) -> None:
        import torch
        from safetensors.torch import load

        try:
            t = load(data)
        except Exception as e:  # a malformed file: safetensors raises its own errors
            raise CriticError(f"read {os.path.join(where, HEAD_FILE)}: {e}") from e
        want = {"v_head.weight": (1, hidden), "v_head.bias": (1,)}
        for name, shape in want.items():
            if name not in t or tuple(t[name].shape) != shape:
                got = tuple(t[name].shape) if name in t else "missing"
                raise CriticError(f"{os.path.join(where, HEAD_FILE)}: tensor {name} is {got}, want shape {list(shape)} "
                                  "(a value head for this base model)")
        with torch.no_grad():
            self.head.weight.copy_(t["v_head.weight"].float())
            self.head.bias.copy_(t["v_head.bias"].float())

    @contextlib.contextmanager
    def active(self):
        """The critic's adapter active (the actor's off) inside; PEFT's
        set_adapter also changes requires_grad, which is put back."""
        grads = {p: p.requires_grad for _, p in self.peft.named_parameters()}
        self.peft.set_adapter(CRITIC)
        for p, g in grads.items():
            p.requires_grad_(g)
        # The critic's factors always train here: PEFT's disable_adapter()
        # (the reference logprobs, beta > 0) ends by re-enabling the active
        # adapter's layers, which freezes every other adapter's, so the
        # state recorded above may say False for them.
        for _, p in self.lora:
            p.requires_grad_(True)
        try:
            yield
        finally:
            self.peft.set_adapter(ACTOR)
            for p, g in grads.items():
                p.requires_grad_(g)

    def values(self, batch: list[dict]):
        """V_t of each sample's completion tokens (float32, with the graph)."""
        ids, att = pad(batch, self.pad_id)
        out = self.peft(input_ids=ids.to(self.d.device), attention_mask=att.to(self.d.device),
                        output_hidden_states=True, use_cache=False)
        v = self.head(out.hidden_states[-1].float()).squeeze(-1)
        return [v[i, len(s["prompt"]) - 1 : len(s["prompt"]) - 1 + len(s["completion"])] for i, s in enumerate(batch)]

    def warming_up(self) -> bool:
        """The critic's first `warmup` updates (train calls) train it
        alone: a fresh critic warms up again, wherever the run is."""
        return self.updates_before < self.c["warmup"]

    # -------------------------------------------------- before the update

    def prepare(self, samples: list[dict], mine: list[int], micro: int) -> None:
        """Scores this process's samples with the critic, gathers every
        sample's old values (and the logprobs kl_in_reward needs), then on
        every process computes the whole batch's rewards, GAE, returns and
        whitened advantages (s["token_adv"] etc.). A non-finite figure fails
        the call, naming the first row that has one."""
        import torch

        self.peft.eval()
        local = {}
        with torch.no_grad(), self.active():
            for k in range(0, len(mine), micro):
                idx = mine[k : k + micro]
                for i, v in zip(idx, self.values([samples[i] for i in idx])):
                    local[i] = {"values": v.double().tolist(), "old": samples[i]["old"], "ref": samples[i].get("ref")}
        if self.d.dist is not None:
            parts: list[Any] = [None] * self.d.world
            self.d.dist.all_gather_object(parts, local)
            for part in parts:
                for i, x in part.items():
                    local[i] = x
        for i, s in enumerate(samples):
            s["values"], s["old"], s["ref"] = local[i]["values"], local[i]["old"], local[i]["ref"]
            for j, v in enumerate(s["values"]):
                if s["mask"][j] and not math.isfinite(v):
                    raise CriticError(f"{row_name(s)}: the critic's value of completion token {j + 1} is {v}: the critic "
                                      "diverged or its state (--critic-in) is corrupt; resume from an earlier iteration, "
                                      "or lower critic.lr")
        beta, kl_in_reward = self.hp["beta"], self.hp["kl_in_reward"]
        rewards = [token_rewards(s, beta, kl_in_reward) for s in samples]
        for s, r in zip(samples, rewards):
            bad = next((j for j, x in enumerate(r) if s["mask"][j] and not math.isfinite(x)), None)
            if bad is not None:
                raise CriticError(f"{row_name(s)}: reward of completion token {bad + 1} is {r[bad]}: a non-finite reward "
                                  "or old/reference logprob; check the rewards and trajectories tables")
        width = max(len(s["completion"]) for s in samples)
        R = torch.zeros((len(samples), width), dtype=torch.float64)
        V = torch.zeros_like(R)
        M = torch.zeros_like(R)
        for i, s in enumerate(samples):
            n = len(s["completion"])
            R[i, :n] = torch.tensor(rewards[i], dtype=torch.float64)
            V[i, :n] = torch.tensor(s["values"], dtype=torch.float64)
            M[i, :n] = torch.tensor(s["mask"], dtype=torch.float64)
        if M.sum() < 2:
            raise CriticError(f"the batch has {int(M.sum())} trainable token(s): whitening the advantages needs 2 or more")
        adv, ret = gae(R, V, M, self.c["gamma"], self.c["lambda"])
        adv = masked_whiten(adv, M)
        vals, rets = [], []
        for i, s in enumerate(samples):
            n = len(s["completion"])
            s["rewards"], s["returns"], s["token_adv"] = rewards[i], ret[i, :n].tolist(), adv[i, :n].tolist()
            for what in ("returns", "token_adv"):
                bad = next((j for j, x in enumerate(s[what]) if s["mask"][j] and not math.isfinite(x)), None)
                if bad is not None:
                    name = "return" if what == "returns" else "advantage"
                    raise CriticError(f"{row_name(s)}: the {name} of completion token {bad + 1} is {s[what][bad]}; "
                                      "check the rewards and the critic's values")
            for j, m in enumerate(s["mask"]):
                if m:
                    vals.append(s["values"][j])
                    rets.append(s["returns"][j])
        self.figures = {
            "explained_variance": explained_variance(vals, rets),
            "values_mean": sum(vals) / len(vals),
            "returns_mean": sum(rets) / len(rets),
        }

    # -------------------------------------------------- one minibatch

    def step(self, samples: list[dict], micro_batches, members, weight_of, apply: bool = True) -> dict:
        """One AdamW step of the critic on a minibatch (this process's
        micro-batches); the figures are the whole minibatch's. weight_of(n)
        is the weight of each trained token of a sequence with n of them,
        the policy loss's aggregation over the minibatch."""
        import torch

        hp, d = self.hp, self.d
        sums = {"value_loss": 0.0, "vf_clip": 0.0, "tokens": 0.0}
        self.peft.train()
        with self.active():
            for idx in micro_batches:
                if not idx:
                    continue
                batch = [samples[i] for i in idx]
                loss = torch.zeros((), dtype=torch.float64, device=d.device)
                for s, v in zip(batch, self.values(batch)):
                    n = int(sum(s["mask"]))
                    if n == 0:
                        continue
                    m = torch.tensor(s["mask"], dtype=torch.float64, device=d.device)
                    old = torch.tensor(s["values"], dtype=torch.float64, device=d.device)
                    ret = torch.tensor(s["returns"], dtype=torch.float64, device=d.device)
                    terms, clipped = value_loss_terms(v.double(), old, ret, self.c["cliprange_value"])
                    w = weight_of(n)
                    part = 0.5 * w * (terms * m).sum()
                    loss = loss + part
                    sums["value_loss"] += float(part.detach())
                    sums["vf_clip"] += float((clipped.double() * m).sum())
                    sums["tokens"] += n
                if loss.requires_grad:
                    loss.backward()
        if d.dist is not None:  # the minibatch's gradient: the sum of the shares
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                d.dist.all_reduce(p.grad)
        keys = list(sums)
        total = dict(zip(keys, d.all_sum([sums[k] for k in keys])))
        clip = hp["clip_norm"] if hp["clip_norm"] > 0 else float("inf")
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        if not math.isfinite(norm):
            raise CriticError(f"critic step {self.steps_before + self.steps + 1}: gradient norm {norm}; the update is not applied")
        if apply:
            self.opt.step()
            self.steps += 1
        self.opt.zero_grad(set_to_none=True)
        return {
            "value_loss": total["value_loss"],
            "vf_clip_frac": total["vf_clip"] / max(total["tokens"], 1.0),
            "critic_grad_norm": norm,
        }

    # -------------------------------------------------- outputs

    def metrics(self, step_metrics: list[dict]) -> dict:
        """The call's critic figures: the means over its steps and those of
        the batch before the update."""
        out = dict(self.figures)
        for key in ("value_loss", "vf_clip_frac", "critic_grad_norm"):
            vals = [s[key] for s in step_metrics if key in s]
            if vals:
                out[key] = sum(vals) / len(vals)
        out["critic_optimizer_steps"] = self.steps_before + self.steps
        return out

    def save(self, out: str) -> None:
        """Writes the critic to the directory out: its PEFT files (the
        layout of the actor's), value_head.safetensors and optimizer.pt."""
        import torch
        from safetensors.torch import save_file

        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            self.peft.save_pretrained(tmp, selected_adapters=[CRITIC], safe_serialization=True)
            for name in PEFT_FILES:
                shutil.move(os.path.join(tmp, CRITIC, name), os.path.join(out, name))
        save_file({"v_head.weight": self.head.weight.detach().float().contiguous().cpu(),
                   "v_head.bias": self.head.bias.detach().float().contiguous().cpu()},
                  os.path.join(out, HEAD_FILE))
        torch.save({
            "format": STATE_FORMAT,
            "optimizer": self.opt.state_dict(),
            "param_names": self.names,
            "optimizer_steps": self.steps_before + self.steps,
            "updates": self.updates_before + 1,
        }, os.path.join(out, OPTIMIZER_FILE))

    def drop(self) -> None:
        """Removes the critic's adapter, so the actor's save has its own only."""
        self.peft.delete_adapter(CRITIC)


def write_values(path: str, samples: list[dict]) -> None:
    """The per-token figures of every trained sample, trainable tokens only,
    one JSON object a line: prompt_id, sample_index, rewards, values,
    returns, advantages (as trained: whitened)."""
    with open(path, "w", encoding="utf-8") as f:
        for s in samples:
            keep = [j for j, m in enumerate(s["mask"]) if m]
            f.write(json.dumps({
                "prompt_id": s["prompt_id"],
                "sample_index": s["sample_index"],
                "rewards": [s["rewards"][j] for j in keep],
                "values": [s["values"][j] for j in keep],
                "returns": [s["returns"][j] for j in keep],
                "advantages": [s["token_adv"][j] for j in keep],
            }, allow_nan=False) + "\n")
