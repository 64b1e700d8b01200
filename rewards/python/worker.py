# The rlpipe Python reward worker: imports reward functions once, then
# answers one JSON request per line on stdin with one JSON line on stdout.
# rewards/python runs it in a sandbox; see docs/REWARDS.md, "Python
# functions". Requests:
#   {"op": "load", "paths": [dir, ...], "functions": {name: "module:fn"}}
#       -> {"errors": {name: "last line of the traceback"}}
#   {"op": "score", "fn": name, "completions": [...], "prompts": [...],
#    "columns": {column: [...]}}
#       -> {"scores": [value, ...]} or {"error": "last line of the traceback"}
# A value is a number, null (None: not scored), {"nonfinite": "nan"} or
# {"type": "str", "repr": "'abc'"} for anything else; the Go side judges.
import importlib
import json
import math
import numbers
import os
import sys
import traceback

# The protocol owns fd 1; what the functions print goes to stderr.
_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr

_functions = {}


def _last_line(exc):
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def _load(req):
    for p in req.get("paths", []):
        if p not in sys.path:
            sys.path.insert(0, p)
    errors = {}
    for name, ref in req["functions"].items():
        module, _, fn = ref.partition(":")
        try:
            f = getattr(importlib.import_module(module), fn)
            if not callable(f):
                raise TypeError(f"{ref} is a {type(f).__name__}, not a function")
            _functions[name] = f
        except MemoryError:
            raise
        except BaseException as e:  # an import may raise anything, SystemExit too
            errors[name] = _last_line(e)
    return {"errors": errors}


def _value(v):
    if v is None:
        return None
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isfinite(f):
            return f
        return {"nonfinite": repr(f)}
    r = repr(v)
    return {"type": type(v).__name__, "repr": r if len(r) <= 80 else r[:77] + "..."}


def _score(req):
    f = _functions[req["fn"]]
    try:
        out = f(completions=req["completions"], prompts=req["prompts"], **req.get("columns", {}))
    except MemoryError:
        raise
    except BaseException as e:
        return {"error": _last_line(e)}
    if hasattr(out, "tolist"):  # a numpy array
        out = out.tolist()
    if not isinstance(out, (list, tuple)):
        return {"notlist": type(out).__name__}
    return {"scores": [_value(v) for v in out]}


for line in sys.stdin:
    req = json.loads(line)
    answer = _load(req) if req["op"] == "load" else _score(req)
    _out.write(json.dumps(answer, allow_nan=False) + "\n")
    _out.flush()
