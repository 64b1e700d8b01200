# Environments that misbehave on purpose, for the skyrl_gym fault tests.
# The action says what to do; any other action scores 1 and ends.
import os
import time

from skyrl_gym.envs.base_text_env import BaseTextEnv


class Faulty(BaseTextEnv):
    def __init__(self, env_config, extras={}):
        super().__init__()
        self.max_turns = 3
        if "needs" in env_config and env_config.needs not in extras:
            raise KeyError(env_config.needs)

    def init(self, prompt):
        return [{"role": "system", "content": "faulty"}] + prompt, {}

    def step(self, action):
        self.turns += 1
        if action == "crash":
            os._exit(3)
        if action == "hang":
            time.sleep(3600)
        if action == "garbage":
            import __main__

            __main__._proto.write("garbage\n")
            __main__._proto.flush()
        if action == "nan":
            return {"observations": [], "reward": float("nan"), "done": True, "metadata": {}}
        if action == "raise":
            raise RuntimeError("the env broke on purpose")
        if action == "noisy":
            print("printed noise")
            os.write(1, b"noise on fd 1\n")
        if action in ("wait", "noisy"):
            return {"observations": [{"role": "user", "content": "go on"}], "reward": 0, "done": False,
                    "metadata": {"turn": self.turns}}
        return {"observations": [], "reward": 1, "done": True, "metadata": {"turn": self.turns}}
