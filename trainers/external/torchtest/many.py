"""Calls the reference trainer's entry point once for each call of a list,
in one process: torch, transformers and peft are imported once, not once a
call, and the import is most of a call's wall time on the tiny model.
torchtest.Many runs it; it is a test harness, not part of the contract.

usage: many.py SCRIPT CALLS

CALLS is a JSON list of {"argv": [...], "dir": DIR}: the script's flags
(what it would get on its command line) and the call's directory, where
the harness writes what the call printed (DIR/output) and how it ended
(DIR/exit.json: the exit status, and the call's seconds).
"""

import contextlib
import importlib.util
import io
import json
import os
import sys
import time
import traceback


def main() -> int:
    script, path = sys.argv[1], sys.argv[2]
    # The script imports its sibling ppo_critic, as it does when run.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    spec = importlib.util.spec_from_file_location("grpo_train", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(path, encoding="utf-8") as f:
        calls = json.load(f)
    for c in calls:
        out = io.StringIO()
        start = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = mod.entry(c["argv"])
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
            except Exception:  # what python would print and exit 1 for
                traceback.print_exc()
                code = 1
        with open(os.path.join(c["dir"], "output"), "w", encoding="utf-8") as f:
            f.write(out.getvalue())
        with open(os.path.join(c["dir"], "exit.json"), "w", encoding="utf-8") as f:
            json.dump({"exit": code or 0, "seconds": time.monotonic() - start}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
