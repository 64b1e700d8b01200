# The Python peer of BenchmarkOpenEnvGoVsPython: the same episodes as the
# Go client, on one persistent /ws socket with the websockets package.
# stdin: {"url": "ws://…/ws", "episodes": [[episode_id, seed], …]}.
# stdout: {"seconds": S, "solved": N}, timed around the episodes alone.
import json
import sys
import time

from websockets.sync.client import connect


def main():
    job = json.load(sys.stdin)
    solved = 0
    with connect(job["url"], max_size=16 << 20) as ws:
        t0 = time.perf_counter()
        for eid, seed in job["episodes"]:
            ws.send(json.dumps({"type": "reset", "data": {"seed": seed, "episode_id": eid}}))
            obs = json.loads(ws.recv())["data"]["observation"]["text"]
            a, b = obs.rstrip("=").split("+")
            for answer in ("-1", str(int(a) + int(b))):
                ws.send(json.dumps({"type": "step", "data": {"answer": answer}}))
                reply = json.loads(ws.recv())["data"]
            solved += reply["reward"] == 1.0
        seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "solved": solved}))


if __name__ == "__main__":
    main()
