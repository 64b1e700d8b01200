"""Load an rlpipe run's tables into pandas, for the notebooks in this folder.

    import rlpipe_data
    run = rlpipe_data.Run("runs-arith")                 # a ref in $RLPIPE_STORE (or ./.rlpipe)
    run = rlpipe_data.Run("try-reward", store="/tmp/st")
    run = rlpipe_data.Run(dir="./arith")                # what `rlpipe export runs-arith: ./arith` wrote
    run = rlpipe_data.Run(dir="s3://my-repo/runs-arith/")  # lakeFS's S3 gateway (needs s3fs, pyarrow)

    rewards = run.rewards()        # every iteration's rewards in one frame, plus `iteration` and `path`
    rewards = run.rewards(10)      # iteration 10's; prompts, trajectories, advantages and health alike
    metrics = run.train_metrics()  # {iteration: train metrics}; train_metrics(10): iteration 10's
    evals = run.evals()            # every checkpoint's metrics per k with intervals, as `rlpipe status` shows them
    samples = run.eval_samples(10, "heldout")  # the scored samples of checkpoint 10 on the set heldout
    report = run.rescore_report()  # what `rlpipe rescore` committed on its branch
    run.iterations()               # the iterations the ref holds

Each reader takes its path from the layout section below, the mirror of Go's package
artifacts/runs (docs/FORMAT.md): no notebook spells a run path. Any other object is read by its
path: run.table(path), run.tables(glob), run.json(path), run.jsons(glob), run.ls(prefix).

From a store, objects are fetched with the rlpipe binary ($RLPIPE_BIN, else `rlpipe` on
PATH, else this checkout's bin/rlpipe): `rlpipe export REF:PATH FILE`. When pyarrow, polars
or duckdb is installed, tables are read as Parquet; otherwise (Debian's python3 has no
Parquet reader) each table is exported with `--format jsonl` and read by pandas.read_json.
A directory is read as it is: a .parquet file needs a reader, unless a .jsonl or .csv file of
the same name sits beside it.
"""

import concurrent.futures
import fnmatch
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

import pandas as pd

__all__ = ["Run", "parquet_reader"]


# --- layout: begin ---
# The layout of a run branch: the mirror of Go's package artifacts/runs (layout.go), and the only
# place in Python that spells a run path. Run's readers build their paths here; the notebooks
# call the readers. Two tests of artifacts/runs hold it to that: TestNotebookLayoutMirrorsRuns
# runs this section alone (it needs nothing but the standard library) and compares every
# builder with the Go package's, and TestNoNotebookSpellsARunPath fails on a run path spelled
# in a notebook's code cell or anywhere else in this file.

CONFIG_PATH = "run/config.yaml"               # runs.ConfigPath
STATE_PATH = "run/state.json"                 # runs.StatePath
ITERATIONS_PREFIX = "iterations/"             # runs.IterationsPrefix
EVALS_PREFIX = "evals/"                       # runs.EvalsPrefix
EVENTS_PREFIX = "events/"                     # runs.EventsPrefix
HEALTH_REPORT_PATH = "reports/health.parquet"  # runs.HealthReportPath
RESCORE_REPORT_PATH = "reports/rescore.json"  # runs.RescoreReportPath

# The files of an iteration's directory and of an evaluation's.
PROMPTS_FILE = "prompts.parquet"
TRAJECTORIES_FILE = "trajectories.parquet"
REWARDS_FILE = "rewards.parquet"
ADVANTAGES_FILE = "advantages.parquet"
HEALTH_FILE = "health.parquet"
TRAIN_METRICS_FILE = "train_metrics.json"
ADAPTER_DIR = "adapter"
SAMPLES_FILE = "samples.parquet"
SUMMARY_FILE = "summary.parquet"


def iteration_dir(n):
    """Iteration n's directory: iterations/000007 (runs.IterationDir)."""
    return f"{ITERATIONS_PREFIX}{n:06d}"


def iteration_path(n, file):
    """A file of iteration n: iterations/000007/rewards.parquet (runs.IterationPath)."""
    return f"{iteration_dir(n)}/{file}"


def eval_dir(checkpoint, evalset):
    """Where the evaluation of a checkpoint (0: the starting policy) on an eval set is written
    (runs.EvalDir)."""
    return f"{EVALS_PREFIX}{checkpoint:06d}/{evalset}"


def eval_path(checkpoint, evalset, file):
    """A file of an evaluation (runs.EvalPath)."""
    return f"{eval_dir(checkpoint, evalset)}/{file}"


def events_path(n):
    """Iteration n's event stream (runs.EventsPath)."""
    return f"{EVENTS_PREFIX}{n:06d}.jsonl"


def metrics_path(n):
    """Iteration n's task metrics (runs.MetricsPath)."""
    return f"{EVENTS_PREFIX}{n:06d}.metrics.json"


def _number(s):
    """A six-digit directory name's number (more digits past 999999), or None."""
    return int(s) if len(s) >= 6 and s.isascii() and s.isdigit() else None


def parse_iteration_path(path):
    """(iteration, rest) for a path under ITERATIONS_PREFIX, else None (runs.ParseIterationPath)."""
    if not path.startswith(ITERATIONS_PREFIX):
        return None
    num, _, rest = path[len(ITERATIONS_PREFIX):].partition("/")
    n = _number(num)
    return None if n is None else (n, rest)


def parse_eval_path(path):
    """(checkpoint, eval set, rest) for a path under EVALS_PREFIX, else None (runs.ParseEvalPath)."""
    if not path.startswith(EVALS_PREFIX):
        return None
    parts = path[len(EVALS_PREFIX):].split("/", 2)
    if len(parts) < 2 or parts[1] == "" or _number(parts[0]) is None:
        return None
    return _number(parts[0]), parts[1], parts[2] if len(parts) == 3 else ""

# --- layout: end ---


def parquet_reader():
    """The name of the installed Parquet reader (pyarrow, polars, duckdb), or None."""
    for name in ("pyarrow", "polars", "duckdb"):
        try:
            __import__(name)
            return name
        except ImportError:
            pass
    return None


def _read_parquet(path, reader):
    if reader == "pyarrow":
        return pd.read_parquet(path, engine="pyarrow")
    if reader == "polars":
        import polars as pl
        return pd.DataFrame(pl.read_parquet(path).to_dict(as_series=False))
    import duckdb
    return duckdb.read_parquet(path).df()


def _find_binary():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bin", "rlpipe")
    for cand in (os.environ.get("RLPIPE_BIN"), shutil.which("rlpipe"), here):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError("no rlpipe binary: run `make build` and set RLPIPE_BIN=bin/rlpipe, or put rlpipe on PATH")


def _iteration(path):
    """The iteration or checkpoint a run path belongs to, or None."""
    parsed = parse_iteration_path(path) or parse_eval_path(path)
    return parsed[0] if parsed else None


class Run:
    """A ref of an rlpipe store (fetched with `rlpipe export`), or a directory holding one."""

    def __init__(self, ref=None, store=None, dir=None, reader="auto", storage_options=None):
        if (ref is None) == (dir is None):
            raise ValueError("give a ref (a branch, tag or commit of the store) or a dir, not both")
        self.ref, self.store, self.dir = ref, store, dir
        self.reader = parquet_reader() if reader == "auto" else reader
        self._cache = None
        self._cache_lock = threading.Lock()  # tables() fetches from several threads
        self._fs = None
        if dir and dir.startswith("s3://"):
            self._fs = _lakefs_s3(storage_options)

    def __repr__(self):
        where = self.dir or f"{self.store or os.environ.get('RLPIPE_STORE', './.rlpipe')}:{self.ref}"
        return f"Run({where}, Parquet read with {self.reader or 'nothing: tables come as JSONL'})"

    def _cli(self, *args):
        cmd = [_find_binary()] + (["--store", self.store] if self.store else []) + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
        return p.stdout

    def ls(self, prefix=""):
        """Every object path under prefix, sorted."""
        if self._fs is not None:
            root = self.dir[len("s3://"):].rstrip("/") + "/"  # s3fs lists paths without s3://
            return sorted(p[len(root):] for p in self._fs.find(root + prefix))
        if self.dir is not None:
            out = []
            for d, _, files in os.walk(os.path.join(self.dir, prefix)):
                out += [os.path.relpath(os.path.join(d, f), self.dir).replace(os.sep, "/") for f in files]
            return sorted(out)
        entries = json.loads(self._cli("ls", f"{self.ref}:{prefix}", "--recursive", "-o", "json"))
        return sorted(e["path"] for e in entries if e.get("type", "object") == "object")

    def _local(self, path):
        """A local file holding path: the Parquet file, or its JSONL export without a reader."""
        if self.dir is not None and self._fs is None:
            full = os.path.join(self.dir, path)
            if path.endswith(".parquet") and self.reader is None:
                for ext in (".jsonl", ".csv"):
                    if os.path.exists(full[: -len(".parquet")] + ext):
                        return full[: -len(".parquet")] + ext
                raise RuntimeError(f"{full}: no Parquet reader: install pyarrow, or export the table "
                                   "beside it as .jsonl (rlpipe export REF:PATH FILE.jsonl)")
            return full
        with self._cache_lock:
            if self._cache is None:
                self._cache = tempfile.mkdtemp(prefix="rlpipe-nb-")
        convert = path.endswith(".parquet") and self.reader is None
        dest = os.path.join(self._cache, path + (".jsonl" if convert else ""))
        if not os.path.exists(dest):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if self._fs is not None:
                self._fs.get(self.dir.rstrip("/") + "/" + path, dest)
            else:
                self._cli("export", f"{self.ref}:{path}", dest, *(["--format", "jsonl"] if convert else []))
        return dest

    def _read(self, local):
        if local.endswith(".parquet"):
            return _read_parquet(local, self.reader)
        if local.endswith(".csv"):
            return pd.read_csv(local)
        return pd.read_json(local, lines=True, dtype=False)

    # The readers of a run's records: each takes its path from the layout section.

    def iterations(self):
        """The iterations the ref holds, ascending."""
        return sorted({p[0] for p in map(parse_iteration_path, self.ls(ITERATIONS_PREFIX)) if p})

    def _every_iteration(self, read, file):
        """(paths, objects): file of every iteration that holds one, read by read."""
        paths = [p for p in self.ls(ITERATIONS_PREFIX) if (parsed := parse_iteration_path(p)) and parsed[1] == file]
        if not paths:
            raise FileNotFoundError(f"no iteration of {self!r} holds {file}")
        return self._each(read, paths)

    def _iteration_tables(self, file, iteration):
        """Iteration n's table, or every iteration's, concatenated."""
        if iteration is not None:
            return self.table(iteration_path(iteration, file))
        return self._concat(*self._every_iteration(self.table, file))

    def prompts(self, iteration=None):
        """The prompts an iteration sampled (every iteration's when None, with `iteration` and
        `path` columns added)."""
        return self._iteration_tables(PROMPTS_FILE, iteration)

    def trajectories(self, iteration=None):
        """The trajectories an iteration generated (every iteration's when None)."""
        return self._iteration_tables(TRAJECTORIES_FILE, iteration)

    def rewards(self, iteration=None):
        """The rewards of an iteration's trajectories, a column r_<name> per component and the
        total (every iteration's when None)."""
        return self._iteration_tables(REWARDS_FILE, iteration)

    def advantages(self, iteration=None):
        """The advantages an iteration trained on (every iteration's when None)."""
        return self._iteration_tables(ADVANTAGES_FILE, iteration)

    def health(self, iteration=None):
        """An iteration's training-health row (every iteration's when None)."""
        return self._iteration_tables(HEALTH_FILE, iteration)

    def train_metrics(self, iteration=None):
        """An iteration's train metrics as a dict (a metric not computed, such as kl at beta 0,
        is None); when None, every iteration's as {iteration: metrics}, ascending."""
        if iteration is not None:
            return self.json(iteration_path(iteration, TRAIN_METRICS_FILE))
        paths, objs = self._every_iteration(self.json, TRAIN_METRICS_FILE)
        return dict(sorted(zip(map(_iteration, paths), objs)))

    def eval_samples(self, checkpoint, evalset):
        """The scored samples of one evaluation: checkpoint (an iteration; 0 for the starting
        policy, as in evals()'s `iteration` column) on the eval set evalset."""
        return self.table(eval_path(checkpoint, evalset, SAMPLES_FILE))

    def rescore_report(self):
        """The report `rlpipe rescore` committed on its branch: from, from_commit, spec_digest,
        the iterations rescored, … (docs/FORMAT.md)."""
        return self.json(RESCORE_REPORT_PATH)

    def evals(self):
        """Every evaluation at the ref: one row per checkpoint, eval set and metric at its k
        (exact_pass@1, avg@8, pass@1, pass@8, pass^8, maj@8) with its 95% interval (ci_low,
        ci_high; None where there is none), read by `rlpipe evals REF -o json`, the reader behind
        `rlpipe status`, the report and the UI, so the figures are theirs. `family` and `k` split
        a metric at k ("pass@8": "pass@k" and 8) as the summary tables name them; a metric defined
        at one k only keeps its name (exact_pass@1, at k 1). `path` is the summary table read."""
        if self.ref is None:
            raise ValueError("evals() reads through the rlpipe binary: open the run by its ref, "
                             "Run('runs-arith'), rather than a directory (or read the summary.parquet tables)")
        out = json.loads(self._cli("evals", self.ref, "-o", "json"))
        cols = ["iteration", "checkpoint", "set", "problems", "n", "metric", "family", "k", "value",
                "ci_low", "ci_high", "path"]
        rows = []
        for e in out["evals"]:
            for m in sorted(e["metrics"]):
                lo, hi = e["intervals"].get(m, (None, None))
                family, k = _at_k(m)
                rows.append([e["iteration"], e["checkpoint"], e["set"], e["problems"], e["n"], m, family, k,
                             e["metrics"][m], lo, hi, e["path"]])
        return pd.DataFrame(rows, columns=cols)

    # Any object, by its path.

    def table(self, path):
        """One table as a DataFrame."""
        return self._read(self._local(path))

    def json(self, path):
        """One JSON object (an iteration's train metrics, a rescore report, …)."""
        with open(self._local(path)) as f:
            return json.load(f)

    def tables(self, pattern, prefix=None):
        """Every table whose path matches the glob pattern, concatenated by column name, with
        `iteration` (the iteration or checkpoint its path is under) and `path` columns added."""
        return self._concat(*self._each(self.table, self._matching(pattern, prefix)))

    def jsons(self, pattern, prefix=None):
        """Every JSON object whose path matches the glob pattern, as {path: object}."""
        return dict(zip(*self._each(self.json, self._matching(pattern, prefix))))

    @staticmethod
    def _concat(paths, frames):
        for p, f in zip(paths, frames):
            if "iteration" not in f.columns:
                f.insert(0, "iteration", _iteration(p))
            f["path"] = p
        return pd.concat(frames, ignore_index=True)

    def _matching(self, pattern, prefix):
        paths = self.paths(pattern, prefix)
        if not paths:
            raise FileNotFoundError(f"nothing matches {pattern} in {self!r}")
        return paths

    def _each(self, read, paths):
        with concurrent.futures.ThreadPoolExecutor(4) as pool:  # one rlpipe process per file
            return paths, list(pool.map(read, paths))

    def paths(self, pattern, prefix=None):
        """The object paths matching the glob pattern (listing only under prefix, if given)."""
        if prefix is None:
            # The directories before the first wildcard (*, ? or [...]).
            head = pattern[: m.start()] if (m := re.search(r"[*?\[]", pattern)) else pattern
            prefix = head[: head.rfind("/") + 1]
        return [p for p in self.ls(prefix) if fnmatch.fnmatch(p, pattern)]

    def close(self):
        if self._cache:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def __del__(self):
        self.close()


def _at_k(metric):
    """A metric's family and k: ("pass@k", 8) for "pass@8"; a metric that is not one of the summary
    table's families at k keeps its name, with the k it ends with ("exact_pass@1", 1)."""
    m = re.fullmatch(r"(avg@|pass@|pass\^|maj@)(\d+)", metric)
    if m:
        return m.group(1) + "k", int(m.group(2))
    tail = re.search(r"(\d+)$", metric)
    return metric, int(tail.group(1)) if tail else None


def _lakefs_s3(storage_options):
    """An s3fs filesystem for lakeFS's S3 gateway, from lakectl's variables by default:
    paths are s3://<repository>/<ref>/<path>. Untested here; needs s3fs."""
    import s3fs
    if storage_options is None:
        endpoint = os.environ["LAKECTL_SERVER_ENDPOINT_URL"].rstrip("/")
        endpoint = endpoint[: -len("/api/v1")] if endpoint.endswith("/api/v1") else endpoint
        storage_options = {
            "key": os.environ["LAKECTL_CREDENTIALS_ACCESS_KEY_ID"],
            "secret": os.environ["LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"endpoint_url": endpoint},
        }
    return s3fs.S3FileSystem(**storage_options)
