# The rlpipe skyrl_gym worker: holds SkyRL-gym environments by handle and
# answers one JSON request per line on stdin with one JSON line on stdout.
# environments/skyrlgym starts it (docs/ROLLOUTS.md, "SkyRL-gym").
#
# Requests (every reply carries the request's id; errors are
#   {"id": N, "ok": false, "error": "Type: message", "kind": K}):
#   {"id": N, "op": "hello"}  -> {"version": skyrl-gym's version}
#   {"id": N, "op": "check", "class": C, "paths": [dir]}  -> {"registered": [ids]}
#   {"id": N, "op": "make", "env": H, "class": C, "config": {}, "extras": {}, "paths": [dir]}
#   {"id": N, "op": "init", "env": H, "prompt": [messages], "make": {make's fields}?}
#       -> {"observations": [messages]}
#   {"id": N, "op": "step", "env": H, "action": "text"}
#       -> {"observations": [...], "reward": R, "done": B, "metadata": {}}; a done env is closed
#   {"id": N, "op": "close", "env": H}
# C is a registered id ("gsm8k") or "module:Class" (registered on first use).
import importlib
import json
import math
import os
import sys
import traceback

# The protocol owns the original fd 1; what the environments print (print,
# or a C library writing to fd 1) goes to stderr. It owns the original fd 0
# too: an environment's subprocesses inherit /dev/null there, so they never
# read the requests.
_proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
_requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
sys.stdin = open(os.devnull, "r")

import skyrl_gym  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

try:
    from importlib.metadata import version as _version

    _VERSION = _version("skyrl-gym")
except Exception:  # pragma: no cover - a source checkout
    _VERSION = "unknown"

_envs = {}


class _Refused(Exception):
    """An answer that is an error of a given kind, not a traceback."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def _last_line(exc):
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def _registered():
    return sorted(skyrl_gym.registry.keys())


def _resolve(cls, paths):
    for p in paths or []:
        if p not in sys.path:
            sys.path.insert(0, p)
    if cls in skyrl_gym.registry:
        return cls
    if ":" in cls:
        skyrl_gym.register(id=cls, entry_point=cls)
        return cls
    raise _Refused("unknown_class", "no registered env with id %r" % cls)


def _make(r):
    cls = _resolve(r["class"], r.get("paths"))
    cfg = OmegaConf.create(r.get("config") or {})
    return skyrl_gym.make(cls, env_config=cfg, extras=r.get("extras") or {})


def _messages(obs):
    out = []
    for m in obs or []:
        if isinstance(m, dict):
            out.append({"role": str(m.get("role", "user")), "content": str(m.get("content", ""))})
        else:
            out.append({"role": "user", "content": str(m)})
    return out


def _handle(r):
    op = r["op"]
    if op == "hello":
        return {"version": _VERSION}
    if op == "check":
        try:
            cls = _resolve(r["class"], r.get("paths"))
            if ":" in cls:  # import it now: a typo is found before any episode
                module, _, name = cls.partition(":")
                getattr(importlib.import_module(module), name)
        except _Refused:
            raise
        except Exception as e:
            raise _Refused("unknown_class", _last_line(e))
        return {"registered": _registered()}
    if op == "make":
        _envs[r["env"]] = _make(r)
        return {}
    env_id = r["env"]
    if op == "init":
        if r.get("make") is not None:
            _envs[env_id] = _make(r["make"])
        obs, _ = _envs[env_id].init(r["prompt"])
        return {"observations": _messages(obs)}
    if op == "step":
        env = _envs[env_id]
        out = env.step(r["action"])
        reward = out.get("reward", 0.0)
        try:
            reward = float(reward if reward is not None else 0.0)
        except (TypeError, ValueError):
            raise _Refused("bad_reward", "reward %r is not a number" % (reward,))
        if not math.isfinite(reward):
            raise _Refused("nonfinite", "non-finite reward %r" % reward)
        done = bool(out.get("done"))
        reply = {"observations": _messages(out.get("observations")), "reward": reward, "done": done,
                 "metadata": out.get("metadata") or {}}
        if done:
            _close(env_id)
        return reply
    if op == "close":
        _close(env_id)
        return {}
    raise _Refused("protocol", "unknown op %r" % op)


def _close(env_id):
    env = _envs.pop(env_id, None)
    if env is not None:
        env.close()


def _write(d):
    _proto.write(json.dumps(d, default=str, allow_nan=False) + "\n")
    _proto.flush()


for line in _requests:
    rid = None
    try:
        req = json.loads(line)
        rid = req.get("id")
        reply = _handle(req)
        reply.update(id=rid, ok=True)
    except _Refused as e:
        reply = {"id": rid, "ok": False, "error": str(e), "kind": e.kind}
        if e.kind == "unknown_class":
            reply["registered"] = _registered()
    except MemoryError:
        raise
    except BaseException as e:  # an environment may raise anything
        if isinstance(e, KeyboardInterrupt):
            raise
        reply = {"id": rid, "ok": False, "error": _last_line(e), "kind": "raised"}
    try:
        _write(reply)
    except ValueError as e:  # a metadata value json cannot carry (NaN)
        _write({"id": rid, "ok": False, "error": "the reply is not JSON: %s" % e, "kind": "raised"})
