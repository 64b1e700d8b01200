# Reward functions with TRL's signature, each a case of worker_test.go.
import os
import socket
import time


def length(completions, prompts, **columns):
    return [float(len(c)) for c in completions]


def exact(completions, prompts, answer, **columns):
    return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]


def metadata_level(completions, prompts, metadata, **columns):
    return [float(m["level"]) for m in metadata]


def last_message(completions, **columns):
    return [float(len(c[-1]["content"])) for c in completions]


def wrong_length(completions, **columns):
    return [1.0]


def non_number(completions, **columns):
    return ["abc" for _ in completions]


def not_a_list(completions, **columns):
    return 1.0


def nan_on_nan(completions, **columns):
    return [float(c) if c in ("nan", "inf") else 1.0 for c in completions]


def none_on_empty(completions, **columns):
    return [None if c == "" else 1.0 for c in completions]


def raises_on_boom(completions, **columns):
    out = []
    for c in completions:
        if c == "boom":
            raise ValueError("boom row")
        out.append(1.0)
    return out


def hangs_on_hang(completions, **columns):
    if "hang" in completions:
        time.sleep(3600)
    return [1.0] * len(completions)


def prints(completions, **columns):
    print("noise on stdout")
    return [2.0] * len(completions)


def write_outside(completions, **columns):
    # The errno of each attempt, negative; 1.0 if one succeeded.
    out = []
    for path in ["/usr/rlpipe-pwned", "/etc/rlpipe-pwned", os.path.abspath(__file__)]:
        try:
            open(path, "a").close()
            out.append(1.0)
        except OSError as e:
            out.append(-float(e.errno))
    return out[: len(completions)]


def network(completions, **columns):
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        return [1.0] * len(completions)
    except OSError as e:
        return [-float(e.errno)] * len(completions)


def secret(completions, **columns):
    return [float(len(os.environ.get("RLPIPE_TEST_SECRET_TOKEN", "")))] * len(completions)


not_callable = 3


def hog(completions, **columns):
    return [float(len(bytearray(1 << 30)))] * len(completions)


def batch_size(completions, prompts, answer, **columns):
    # Each row's score is the number of rows in its call, so a test sees
    # how the rows were batched; a wrong answer column fails.
    assert len(answer) == len(completions)
    return [float(len(completions))] * len(completions)


def exits_on_exit(completions, **columns):
    if "exit" in completions:
        os._exit(3)
    return [1.0] * len(completions)


def segfaults_on_crash(completions, **columns):
    if "crash" in completions:
        import ctypes
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return [1.0] * len(completions)


def spin(completions, **columns):
    # CPU-bound: about the same work per row, so a pool's speed-up is the
    # machine's, not the rows'.
    out = []
    for c in completions:
        x = 0
        for i in range(200_000):
            x = (x * 31 + i + len(c)) % 1_000_003
        out.append(float(x % 7))
    return out


# A number drawn once per worker process: rows scored by one worker share
# it, so a test sees which rows went to which worker.
_token = float(int.from_bytes(os.urandom(3), "big"))


def worker_token(completions, **columns):
    if "exit" in completions:
        os._exit(3)
    return [_token] * len(completions)
