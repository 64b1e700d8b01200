"""Harbor's own trials of tasks with the bubblewrap environment, in one process.

Usage: peer.py TRIALS_DIR REPEAT TASK_DIR... ; prints one JSON object:
{"tasks": {TASK_DIR: {"oracle": rewards, "nop": rewards}}, "seconds": {"oracle": s, "nop": s}}
where rewards are the verifier's (reward.json's or {"reward": reward.txt}) and seconds the
wall time of the REPEAT trials of each agent over all tasks (the trial total: environment
setup, agent, verification, teardown)."""
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
logging.disable(logging.WARNING)

from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, TrialConfig  # noqa: E402
from harbor.trial.trial import Trial  # noqa: E402


async def trial(task: str, agent: str, trials: Path, n: int) -> dict:
    cfg = TrialConfig(task=TaskConfig(path=Path(task)), trial_name=f"{Path(task).name}-{agent}-{n}",
                      trials_dir=trials, agent=AgentConfig(name=agent),
                      environment=EnvironmentConfig(import_path="bwrapenv:BwrapEnvironment"))
    result = await (await Trial.create(cfg)).run()
    if result.verifier_result is None:
        raise SystemExit(f"{task} with {agent}: no verifier result: {result.exception_info}")
    return result.verifier_result.rewards


async def main() -> None:
    trials, repeat, tasks = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    out = {"tasks": {t: {} for t in tasks}, "seconds": {}}
    for agent in ("oracle", "nop"):
        start = time.perf_counter()
        for n in range(repeat):
            for t in tasks:
                out["tasks"][t][agent] = await trial(t, agent, trials, n)
        out["seconds"][agent] = time.perf_counter() - start
    print(json.dumps(out))


asyncio.run(main())
