"""Load an rlpipe run's tables into pandas, for the notebooks in this folder.

    import rlpipe_data
    run = rlpipe_data.Run("runs-arith")                 # a ref in $RLPIPE_STORE (or ./.rlpipe)
    run = rlpipe_data.Run("try-reward", store="/tmp/st")
    run = rlpipe_data.Run(dir="./arith")                # what `rlpipe export runs-arith: ./arith` wrote
    run = rlpipe_data.Run(dir="s3://my-repo/runs-arith/")  # lakeFS's S3 gateway (needs s3fs, pyarrow)

    rewards = run.tables("iterations/*/rewards.parquet")  # one frame, plus an `iteration` column
    summary = run.table("evals/000010/heldout/summary.parquet")
    metrics = run.json("iterations/000010/train_metrics.json")
    per_iteration = run.jsons("iterations/*/train_metrics.json")  # {path: object}
    evals = run.evals()    # every checkpoint's metrics per k with intervals, as `rlpipe status` shows them

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
    """The iteration a run path belongs to: its first directory of six digits (docs/FORMAT.md)."""
    m = re.search(r"(?:^|/)(\d{6})/", path)
    return int(m.group(1)) if m else None


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

    def table(self, path):
        """One table as a DataFrame."""
        return self._read(self._local(path))

    def json(self, path):
        """One JSON object (train_metrics.json, reports/rescore.json, …)."""
        with open(self._local(path)) as f:
            return json.load(f)

    def evals(self):
        """Every evaluation at the ref: one row per checkpoint, eval set and metric at its k
        (exact_pass@1, avg@8, pass@1, pass@8, pass^8, maj@8) with its 95% interval (ci_low,
        ci_high; None where there is none), read by `rlpipe evals REF -o json`, the reader behind
        `rlpipe status`, the report and the UI, so the figures are theirs."""
        if self.ref is None:
            raise ValueError("evals() reads through the rlpipe binary: open the run by its ref, "
                             "Run('runs-arith'), rather than a directory (or read the summary.parquet tables)")
        out = json.loads(self._cli("evals", self.ref, "-o", "json"))
        cols = ["iteration", "checkpoint", "set", "problems", "n", "metric", "value", "ci_low", "ci_high"]
        rows = []
        for e in out["evals"]:
            for m in sorted(e["metrics"]):
                lo, hi = e["intervals"].get(m, (None, None))
                rows.append([e["iteration"], e["checkpoint"], e["set"], e["problems"], e["n"], m, e["metrics"][m], lo, hi])
        return pd.DataFrame(rows, columns=cols)

    def tables(self, pattern, prefix=None):
        """Every table whose path matches the glob pattern, concatenated by column name, with
        `iteration` (from iterations/NNNNNN/ or evals/NNNNNN/) and `path` columns added."""
        paths, frames = self._each(self.table, pattern, prefix)
        for p, f in zip(paths, frames):
            if "iteration" not in f.columns:
                f.insert(0, "iteration", _iteration(p))
            f["path"] = p
        return pd.concat(frames, ignore_index=True)

    def jsons(self, pattern, prefix=None):
        """Every JSON object whose path matches the glob pattern, as {path: object}."""
        return dict(zip(*self._each(self.json, pattern, prefix)))

    def _each(self, read, pattern, prefix):
        paths = self.paths(pattern, prefix)
        if not paths:
            raise FileNotFoundError(f"nothing matches {pattern} in {self!r}")
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
