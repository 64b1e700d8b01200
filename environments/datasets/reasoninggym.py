# Generates reasoning-gym problems for rlpipe's `dataset reasoning-gym`
# (environments/datasets/reasoninggym.go embeds this file and runs it with
# the project venv's python, outside the sandbox: it is the package's own
# trusted code, like a dataset import).
#
# Request: one JSON object on stdin,
#   {"list": true}
# or
#   {"seed": S, "families": [{"name": F, "config": {...}, "heldout": H, "train": N}, ...]}
# Answer: JSON lines on stdout, first {"version": V}; then for a list
# {"family": F, "keys": [...]} per family; for a generation one
# {"family": F, "split": "test"|"train", "question": Q, "answer": A,
#  "metadata": "<JSON text>"} per row, family after family, each family's
# held-out rows before its training rows. A problem Go reports to the
# user is one line {"error": {"code": ..., ...}} and exit status 3.
# Anything the package prints goes to stderr.

import dataclasses
import io
import json
import sys

# Run with -c: the working directory would come first on sys.path, and a
# random.py there would shadow the standard library's.
if sys.path and sys.path[0] == "":
    del sys.path[0]

# The protocol is UTF-8 whatever the locale; what the package prints goes
# to stderr.
out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
sys.stdout = sys.stderr

# Draws per family: twice the rows asked for, and 1000 more for the
# duplicates of small problem spaces. A family that yields fewer distinct
# questions within them is an error (too_few).
DRAW_FACTOR, DRAW_EXTRA = 2, 1000


def emit(obj):
    out.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False))
    out.write("\n")


def fail(code, **detail):
    detail["code"] = code
    emit({"error": detail})
    out.flush()
    sys.exit(3)


def jsonable(v):
    # Metadata holds what a family's score_answer reads; JSON keeps lists
    # and dicts, tuples become lists, sets sorted lists, the rest str.
    if isinstance(v, (set, frozenset)):
        return sorted((jsonable(x) for x in v), key=repr)
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


def main():
    req = json.load(sys.stdin)
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except Exception as e:  # noqa: BLE001 - any import failure is the venv's
        fail("no_package", detail=f"{type(e).__name__}: {e}")
    try:
        from importlib.metadata import version

        ver = version("reasoning-gym")
    except Exception:  # noqa: BLE001
        ver = getattr(reasoning_gym, "__version__", "unknown")
    emit({"version": ver})
    # composite mixes other families; rlpipe mixes them itself (FAMILY:WEIGHT).
    known = sorted(n for n in DATASETS if n != "composite")
    if req.get("list"):
        for name in known:
            keys = [f.name for f in dataclasses.fields(DATASETS[name][1]) if f.name not in ("seed", "size")]
            emit({"family": name, "keys": keys})
        return
    seed = req["seed"]
    made = []
    # Every family and key is checked before anything is generated.
    for fam in req["families"]:
        name = fam["name"]
        if name not in known:
            fail("unknown_family", family=name, known=known)
        cls, cfg_cls = DATASETS[name]
        keys = [f.name for f in dataclasses.fields(cfg_cls) if f.name not in ("seed", "size")]
        for k in fam["config"]:
            if k not in keys:
                fail("unknown_key", family=name, key=k, known=keys)
        need = fam["heldout"] + fam["train"]
        draws = DRAW_FACTOR * need + DRAW_EXTRA
        try:
            ds = reasoning_gym.create_dataset(name, seed=seed, size=draws, **fam["config"])
        except Exception as e:  # noqa: BLE001 - a config the family refuses
            msg = str(e) or type(e).__name__
            fail("bad_config", family=name, detail=f"{type(e).__name__}: {msg}" if str(e) else msg)
        made.append((fam, ds, draws))
    seen = set()
    for fam, ds, draws in made:
        name = fam["name"]
        idx = emitted = 0
        for split, want in (("test", fam["heldout"]), ("train", fam["train"])):
            got = 0
            while got < want:
                if idx >= draws:
                    fail("too_few", family=name, heldout=fam["heldout"], train=fam["train"], draws=draws, distinct=emitted)
                try:
                    item = ds[idx]
                except Exception as e:  # noqa: BLE001
                    fail("generate", family=name, index=idx, detail=f"{type(e).__name__}: {e}")
                idx += 1
                q = item.get("question")
                if not isinstance(q, str) or not q.strip() or q in seen:
                    continue
                seen.add(q)
                a = item.get("answer")
                a = "" if a is None else a if isinstance(a, str) else str(a)
                try:
                    meta = json.dumps(item.get("metadata") or {}, ensure_ascii=False, sort_keys=True,
                                      allow_nan=False, default=jsonable)
                except ValueError as e:
                    fail("generate", family=name, index=idx - 1, detail=f"metadata: {e}")
                emit({"family": name, "split": split, "question": q, "answer": a, "metadata": meta})
                got += 1
                emitted += 1


main()
out.flush()
