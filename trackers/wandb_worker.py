"""rlpipe's wandb worker: one W&B run written through the real wandb package.

The Go side (trackers/wandb.go) runs it with -I -u and speaks JSON lines:
the worker's first line is {"ready": true, "version": V} once wandb imports
(else {"error": ...} and it exits); then each request line gets one reply
line, {"ok": true, ...} or {"error": "..."}:

  {"op": "start", "dir", "project", "entity", "id", "name", "mode", "config"}
      wandb.init(resume="allow"): the same run id continues the same run.
  {"op": "log", "points": [{"step", "time", "scalars", "commit"}]}
      each point at its step (_step), its commit time as _timestamp; a point
      with eval/ scalars also carries "checkpoint": step, the step metric of
      eval/*. A point below the last step this worker logged is skipped
      (already logged: a retried Log), one at that step merges into its row.
  {"op": "artifact", "name", "type", "dir", "aliases", "metadata"}
      the files of dir as a new version of artifact name (run.log_artifact);
      wandb copies them to its staging area before the reply.
  {"op": "finish", "exit_code"}
      run.finish; the worker exits when its stdin closes.

wandb's own output goes to stderr: fd 1 is kept for the protocol alone.
"""
import datetime
import json
import os
import sys
import time

proto = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr


def reply(**kw):
    proto.write(json.dumps(kw) + "\n")
    proto.flush()


try:
    import wandb
except Exception as e:  # the Go side turns this into the plan-time message
    reply(error="import wandb: %s: %s" % (type(e).__name__, e))
    sys.exit(0)

reply(ready=True, version=wandb.__version__)

run = None
last = -1


def start(req):
    global run, last
    # wandb names a run's directory by the second it starts: a run that
    # started in the same second (a quick resume) waits for the next one.
    prefix = "offline-run" if req["mode"] == "offline" else "run"
    while os.path.exists(os.path.join(req["dir"], "wandb", "%s-%s-%s" % (
            prefix, datetime.datetime.now().strftime("%Y%m%d_%H%M%S"), req["id"]))):
        time.sleep(0.05)
    settings = wandb.Settings(silent=True, console="off", save_code=False, disable_git=True,
                              x_disable_stats=True, x_disable_meta=True)
    run = wandb.init(dir=req["dir"], project=req["project"], entity=req.get("entity") or None,
                     id=req["id"], name=req["name"], resume="allow", mode=req["mode"],
                     config=req["config"], settings=settings)
    last = -1
    # pass@k and every eval metric are plotted against the checkpoint
    # they evaluate: a step series of their own.
    run.define_metric("checkpoint")
    run.define_metric("eval/*", step_metric="checkpoint")
    return {"run_dir": os.path.dirname(run.dir), "id": run.id}


def log(req):
    global last
    logged = skipped = 0
    for p in sorted(req["points"], key=lambda p: p["step"]):
        step = p["step"]
        if step < last:
            skipped += 1
            continue
        row = dict(p.get("scalars") or {})
        if any(k.startswith("eval/") for k in row):
            row["checkpoint"] = step
        if p.get("commit"):
            row["rlpipe/commit"] = p["commit"]
        if p.get("time"):
            row["_timestamp"] = p["time"]
        run.log(row, step=step)
        last = step
        logged += 1
    return {"logged": logged, "skipped": skipped}


def artifact(req):
    art = wandb.Artifact(req["name"], type=req["type"], metadata=req.get("metadata") or {})
    art.add_dir(req["dir"])
    run.log_artifact(art, aliases=req.get("aliases") or [])
    return {}


def finish(req):
    global run
    run.finish(exit_code=req["exit_code"])
    run = None
    return {}


ops = {"start": start, "log": log, "artifact": artifact, "finish": finish}
for line in sys.stdin:
    try:
        req = json.loads(line)
        if req.get("op") != "start" and run is None:
            raise RuntimeError("%s before start" % req.get("op"))
        reply(ok=True, **ops[req["op"]](req))
    except Exception as e:
        reply(error="%s: %s" % (type(e).__name__, e))
