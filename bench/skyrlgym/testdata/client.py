# The Python side of BenchmarkSkyRLGym: drives the skyrl_gym worker
# (environments/skyrlgym/worker.py, the same script rlpipe runs) over the
# same JSON-lines pipe, the same requests for the same episodes, WINDOW
# episodes in flight: each window's make, init and step requests are
# written together, then their replies read.
# Usage: client.py WORKER_PY EPISODES WINDOW ROUNDS; prints one JSON line
# {"seconds": [per round], "reward": total of the last round, "start": s}.
import json
import subprocess
import sys
import time

worker, episodes, window, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
proc = subprocess.Popen([sys.executable, "-I", worker], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
ids = 0


def exchange(reqs):
    global ids
    for r in reqs:
        ids += 1
        r["id"] = ids
        proc.stdin.write(json.dumps(r) + "\n")
    proc.stdin.flush()
    out = []
    for _ in reqs:
        rep = json.loads(proc.stdout.readline())
        if not rep["ok"]:
            raise SystemExit("the worker refused: %r" % rep)
        out.append(rep)
    return out


exchange([{"op": "hello"}])
start = time.perf_counter() - t0


def row(i):
    a, b = 100 + i % 900, 7 + i % 90
    answer = a + b
    if i % 10 == 9:
        action = "%d" % answer
    elif i % 2 == 0:
        action = "#### %d" % answer
    else:
        action = "#### %d" % (answer + 1)
    return "What is %d+%d?" % (a, b), str(answer), action


seconds, reward = [], 0.0
for rnd in range(rounds):
    reward = 0.0
    t = time.perf_counter()
    for lo in range(0, episodes, window):
        batch = range(lo, min(lo + window, episodes))
        rows = {i: row(i) for i in batch}
        exchange([{"op": "make", "env": "r%d-%d" % (rnd, i), "class": "gsm8k", "config": {},
                   "extras": {"reward_spec": {"method": "rule", "ground_truth": rows[i][1]}}, "paths": []} for i in batch])
        exchange([{"op": "init", "env": "r%d-%d" % (rnd, i), "prompt": [{"role": "user", "content": rows[i][0]}]} for i in batch])
        for rep in exchange([{"op": "step", "env": "r%d-%d" % (rnd, i), "action": rows[i][2]} for i in batch]):
            reward += rep["reward"]
    seconds.append(time.perf_counter() - t)
proc.stdin.close()
proc.wait()
print(json.dumps({"seconds": seconds, "reward": reward, "start": start}))
