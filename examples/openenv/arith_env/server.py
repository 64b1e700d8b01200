"""An OpenEnv environment served by the real openenv package: "a+b=",
two answers an episode, in the embedded model's vocabulary (digits, +,
=), so rlpipe's tiny models can play it.

rlpipe serves it with `python -m uvicorn arith_env.server:app` from
examples/openenv (its rl_options serve:). It is pure Python on
openenv.core, so it runs in the openenv venv alone (reasoning-gym is not
there): a reasoning-gym task would replace reset's problem.
"""

import random
from typing import Any, Optional

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

TRIES = 2


class ArithAction(Action):
    answer: str = Field(..., description="The answer: a whole number")


class ArithObservation(Observation):
    text: str = Field(default="", description="The problem, or how the episode ended")


class ArithEnvironment(Environment):
    # Each WebSocket session gets its own instance: sessions run at once.
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=None, step_count=0)
        self._problem, self._sum = "", 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> ArithObservation:
        rng = random.Random(seed)
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        self._problem, self._sum = f"{a}+{b}=", a + b
        self._state = State(episode_id=episode_id, step_count=0)
        return ArithObservation(text=self._problem, reward=0.0, done=False)

    def step(self, action: ArithAction) -> ArithObservation:  # type: ignore[override]
        self._state.step_count += 1
        tries = self._state.step_count
        solved = action.answer.strip() == str(self._sum)
        meta = {"tries": tries, "solved": solved}
        if solved:
            return ArithObservation(text="correct", reward=1.0, done=True, metadata=meta)
        if tries >= TRIES:
            return ArithObservation(text="wrong", reward=0.0, done=True, metadata=meta)
        return ArithObservation(text=self._problem, reward=0.0, done=False, metadata=meta)

    @property
    def state(self) -> State:
        return self._state


# max_concurrent_envs: the template's 1 would refuse a second episode at
# once (CAPACITY_REACHED).
app = create_app(ArithEnvironment, ArithAction, ArithObservation, env_name="arith", max_concurrent_envs=64)
