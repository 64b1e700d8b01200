#!/usr/bin/env bash
# Executes every notebook in notebooks/ headlessly against a short demo run,
# and fails when a committed notebook holds outputs, a cell errors, or a cell
# tagged "plot" produced no image. What it needs: scripts/notebook-deps.sh.
#
#   scripts/notebooks.sh                   # the check `make notebooks` runs
#   KEEP=1 scripts/notebooks.sh            # keep the store and the executed notebooks
#   RLPIPE_PYTHON=/path/to/python3         # a Python with nbconvert, ipykernel, pandas, matplotlib
#   NOTEBOOK_TIMEOUT=120                   # seconds a cell may take
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
start=$SECONDS

# 1. What is committed carries no outputs: they are noise in diffs and go stale.
py_any="$(command -v python3 || echo /usr/bin/python3)"
"$py_any" - notebooks/*.ipynb <<'EOF'
import json, sys
bad = []
for path in sys.argv[1:]:
    for i, cell in enumerate(json.load(open(path))["cells"]):
        if cell.get("outputs") or cell.get("execution_count") is not None:
            bad.append(f"{path}: cell {i} has outputs or an execution count")
if bad:
    sys.exit("\n".join(bad) + "\nstrip them: jupyter nbconvert --clear-output --inplace notebooks/*.ipynb")
print(f"notebooks: {len(sys.argv) - 1} notebooks, outputs stripped")
EOF

# 2. Pythons that can execute them: the project's data venv (pyarrow, polars,
# duckdb: tables read as Parquet; scripts/data-venv.sh makes it), unless
# RLPIPE_PYTHON names another; and, to keep the fallback honest, a bare
# Python without a Parquet reader (Debian's /usr/bin/python3 with pandas),
# on which explore_run runs again reading the tables as JSONL.
mods="import nbconvert, ipykernel, pandas, matplotlib"
noparquet="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('pyarrow', 'polars', 'duckdb')))"
py=""
if [ -n "${RLPIPE_PYTHON:-}" ]; then
  "$RLPIPE_PYTHON" -c "$mods" 2>/dev/null || { echo "notebooks: RLPIPE_PYTHON=$RLPIPE_PYTHON lacks nbconvert, ipykernel, pandas or matplotlib" >&2; exit 1; }
  py="$(command -v "$RLPIPE_PYTHON")"
elif venv_py="$(./scripts/data-venv.sh)" && "$venv_py" -c "$mods" 2>/dev/null; then
  py="$venv_py"
else
  for cand in /usr/bin/python3 python3; do
    if "$cand" -c "$mods" 2>/dev/null; then py="$(command -v "$cand")"; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "notebooks: no Python with nbconvert, ipykernel, pandas and matplotlib: run scripts/data-venv.sh or scripts/notebook-deps.sh" >&2
  exit 1
fi
reader="$("$py" -c 'import sys; sys.path.insert(0, "notebooks"); import rlpipe_data; print(rlpipe_data.parquet_reader() or "")')"
bare=""
if [ -x /usr/bin/python3 ] && [ "$py" != /usr/bin/python3 ] && /usr/bin/python3 -c "$mods" 2>/dev/null && /usr/bin/python3 -c "$noparquet" 2>/dev/null; then
  bare=/usr/bin/python3
fi
echo "notebooks: on $py (tables read as ${reader:-JSONL})${bare:+; explore_run also on $bare (JSONL)}"

work="$(mktemp -d "${TMPDIR:-/tmp}/rlpipe-notebooks.XXXXXX")"
cleanup() {
  if [ "${KEEP:-0}" = 1 ]; then echo "notebooks: kept $work (store, executed notebooks)"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# 3. The binary the helper calls, and a short run: the arithmetic demo cut to
# 12 iterations, evaluated every 4, then rescored onto a branch.
if [ -n "${RLPIPE_BIN:-}" ]; then
  bin="$RLPIPE_BIN"
else
  go build -o bin/rlpipe ./cli/rlpipe
  bin="$root/bin/rlpipe"
fi
cp examples/arithmetic/*.yaml "$work/"
sed -i -e 's/^iterations: [0-9]*/iterations: 12/' -e 's/^\(  every: \)[0-9]*/\14/' "$work/pipeline.yaml"
grep -q '^iterations: 12$' "$work/pipeline.yaml" && grep -q '^  every: 4$' "$work/pipeline.yaml" || {
  echo "notebooks: examples/arithmetic/pipeline.yaml changed shape: update the sed lines in $0" >&2; exit 1; }
export RLPIPE_STORE="$work/store"
"$bin" init-store >/dev/null
"$bin" dataset arith main >/dev/null
"$bin" run -f "$work/pipeline.yaml" --log-level warn --no-report >"$work/run.log" || { cat "$work/run.log"; exit 1; }
"$bin" rescore --from runs-arith --reward "$work/reward-length.yaml" --branch try-reward >"$work/rescore.log" || {
  cat "$work/rescore.log"; exit 1; }
echo "notebooks: demo run and rescore in $((SECONDS - start)) s"

# 4. Execute each notebook with a kernel on that same Python; nbconvert stops
# at the first cell that raises and exits non-zero.
mkdir -p "$work/out" "$work/out-bare" "$work/mpl"
kernel() { # NAME PYTHON
  mkdir -p "$work/jupyter/kernels/$1"
  printf '{"argv": ["%s", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "%s", "language": "python"}\n' \
    "$2" "$1" >"$work/jupyter/kernels/$1/kernel.json"
}
kernel rlpipe "$py"
[ -z "$bare" ] || kernel rlpipe-bare "$bare"
export JUPYTER_PATH="$work/jupyter" MPLCONFIGDIR="$work/mpl" RLPIPE_BIN="$bin" \
  RLPIPE_RUN=runs-arith RLPIPE_RESCORED=try-reward PYDEVD_DISABLE_FILE_VALIDATION=1
unset MPLBACKEND RLPIPE_SOURCE
pids=()
execute() { # PYTHON KERNEL OUTDIR NOTEBOOK LOGNAME
  "$1" -m nbconvert --to notebook --execute --output-dir "$3" \
    --ExecutePreprocessor.kernel_name="$2" --ExecutePreprocessor.timeout="${NOTEBOOK_TIMEOUT:-120}" \
    "$4" >"$work/$5.log" 2>&1 &
  pids+=("$!:$5")
}
for nb in notebooks/*.ipynb; do
  execute "$py" rlpipe "$work/out" "$nb" "$(basename "$nb" .ipynb)"
done
[ -z "$bare" ] || execute "$bare" rlpipe-bare "$work/out-bare" notebooks/explore_run.ipynb explore_run-bare
failed=0
for p in "${pids[@]}"; do
  if ! wait "${p%%:*}"; then
    echo "notebooks: ${p#*:} failed (KEEP=1 keeps $work/${p#*:}.log):" >&2
    # The cell that raised and its error, without the runner's own traceback and colours.
    sed -e 's/\x1b\[[0-9;]*m//g' -e '1,/^nbclient.exceptions.CellExecutionError/d' "$work/${p#*:}.log" | tail -30 >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1

# 5. Every cell tagged "plot" drew at least one image, and explore_run's Run
# says which reader read the tables: the one installed, or JSONL on the bare
# Python.
"$py" - "$reader" "$work"/out/*.ipynb "$work"/out-bare/*.ipynb <<'EOF'
import json, sys
bad = []
reader = sys.argv[1]
for path in sys.argv[2:]:
    if "*" in path:  # no bare pass
        continue
    cells = json.load(open(path))["cells"]
    plots = [c for c in cells if "plot" in c.get("metadata", {}).get("tags", [])]
    images = sum(any("image/png" in o.get("data", {}) for o in c.get("outputs", [])) for c in plots)
    name = path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]
    if not plots or images < len(plots):
        bad.append(f"{name}: {images} of {len(plots)} plot cells drew an image")
    if name.endswith("explore_run.ipynb"):
        want = "tables come as JSONL" if name.startswith("out-bare/") or not reader else f"Parquet read with {reader}"
        text = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in cells for o in c.get("outputs", []))
        if want not in text:
            bad.append(f"{name}: its Run does not say {want!r}")
    print(f"notebooks: {name}: {len(cells)} cells ran, {images} of {len(plots)} plots drawn")
if bad:
    sys.exit("notebooks: " + "; ".join(bad))
EOF
echo "notebooks: ok in $((SECONDS - start)) s"
