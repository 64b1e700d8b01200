"""The floor of BenchmarkProductionIteration (bench/prodsize).

Reads the trajectories file rlpipe wrote (untimed), then writes the same
table with pyarrow.parquet's writer, with rlpipe's compression (zstd level
1) and dictionary encoding on the columns rlpipe's file has it on, and
reads it back: both timed here, imports and the untimed read left out.
Prints one JSON object: write_s, read_s, rows, bytes.

usage: floor.py SRC DST
"""

import json
import os
import sys
import time

import pyarrow.parquet as pq


def dictionary_columns(md):
    """The leaf paths that have a dictionary page in any row group."""
    cols = set()
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            if rg.column(c).has_dictionary_page:
                cols.add(rg.column(c).path_in_schema)
    return sorted(cols)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    pf = pq.ParquetFile(src)
    dicts = dictionary_columns(pf.metadata)
    table = pf.read()
    start = time.perf_counter()
    pq.write_table(table, dst, compression="zstd", compression_level=1, use_dictionary=dicts)
    written = time.perf_counter()
    back = pq.read_table(dst)
    done = time.perf_counter()
    if back.num_rows != table.num_rows:
        sys.exit(f"floor.py: read {back.num_rows} rows of {dst}, wrote {table.num_rows}")
    got = dictionary_columns(pq.ParquetFile(dst).metadata)
    if got != dicts:
        sys.exit(f"floor.py: {dst} has dictionaries on {got}, rlpipe's file on {dicts}")
    json.dump({"write_s": written - start, "read_s": done - written,
               "rows": back.num_rows, "bytes": os.path.getsize(dst)}, sys.stdout)


if __name__ == "__main__":
    main()
