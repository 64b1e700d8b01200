# Environments that misbehave on purpose, for the skyrl_gym fault tests.
# The action says what to do; any other action scores 1 and ends.
import os
import subprocess
import sys
import time

from skyrl_gym.envs.base_text_env import BaseTextEnv


def _wait_for(path):
    open(path + ".serving", "w").close()  # the test sees this request served
    while not os.path.exists(path):
        time.sleep(0.01)


class Faulty(BaseTextEnv):
    live = 0  # envs made and not yet closed, in this worker

    def __init__(self, env_config, extras={}):
        super().__init__()
        if extras.get("crash") == "make":
            os._exit(3)
        Faulty.live += 1
        self.max_turns = 3
        if "needs" in env_config and env_config.needs not in extras:
            raise KeyError(env_config.needs)

    def init(self, prompt):
        return [{"role": "system", "content": "faulty"}] + prompt, {}

    def close(self):
        Faulty.live -= 1

    def step(self, action):
        self.turns += 1
        if action == "crash":
            os._exit(3)
        if action.startswith("crashon:"):  # crash once the file exists
            _wait_for(action[len("crashon:"):])
            os._exit(3)
        if action.startswith("blockon:"):  # answer once the file exists
            _wait_for(action[len("blockon:"):])
        if action == "forkcrash":  # a child holding stderr outlives the worker
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            os._exit(3)
        if action == "stdin":  # a child reading its stdin
            out = subprocess.run([sys.executable, "-c", "import sys; print(len(sys.stdin.buffer.read()))"],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
            return {"observations": [{"role": "user", "content": "stdin had %s bytes" % out}], "reward": 1,
                    "done": True, "metadata": {}}
        if action == "live":
            return {"observations": [{"role": "user", "content": "%d live" % Faulty.live}], "reward": 1,
                    "done": True, "metadata": {}}
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
