// Package tables defines rlpipe's typed tables — prompts, trajectories,
// rewards, advantages, values (PPO's per-token values), eval_samples and
// eval_summary — as Arrow schemas with a Go row type each, and reads and
// writes them as Parquet files that DuckDB, pandas and polars open
// unchanged.
//
// # Tables
//
// A *Table[T] binds a table name, a schema version and an Arrow schema to
// a plain Go struct T. The package declares one per table (Prompts,
// Trajectories, Rewards, Advantages, EvalSamples, EvalSummary); Lookup
// finds one by name when the caller has only a string (the CLI). Every file
// written carries the table name and schema version under MetaTable and
// MetaSchemaVersion, both in the Arrow schema metadata and in the Parquet
// key-value metadata.
//
// Reward components are columns: a component named "correct" is the
// nullable float64 column r_correct, so df["r_correct"].mean() and
// SELECT avg(r_correct) work as they read. RewardsWith fixes the
// components of a file to write; a reader finds them in the file.
//
// # Writing
//
// Write writes a slice; NewWriter streams rows (or Arrow record batches
// via WriteRecord) with bounded memory:
//
//	w, err := tables.NewWriter(f, tables.Trajectories, nil)
//	for _, t := range batch {
//		err = w.Write(t)
//	}
//	err = w.Close() // writes the footer; does not close f
//
// Files are zstd-compressed, with row groups of at most 65,536 rows or
// about 8 MiB of data (WriteOptions), so readers can split work by row
// group and never hold more than one, and a writer, which holds a row
// group's compressed pages until it ends, holds no more. Write buffers
// 4,096 rows or 4 MiB of them, whichever comes first, so the heap a
// writer or a reader holds does not grow with the file (bench/prodsize
// measures it on 8,192 trajectories of 2,048 tokens). Long text and
// number lists are
// stored without dictionary encoding. The bytes depend only on the rows:
// writing the same rows twice gives identical files, so files can be cached
// by digest.
//
// # Reading
//
// NewReader opens a file as a given table and checks it before any row is
// read. A file that is not Parquet or was cut short fails with
// ErrNotParquet; a file of another table, of a newer schema version, or
// lacking a column or with a column of the wrong type fails with a
// *SchemaError (ErrSchemaMismatch) naming the file, table, column and the
// expected and found types. Both wrap artifacts.ErrInvalid.
//
// Files from other tools are accepted when their columns fit: the rlpipe
// metadata may be missing, columns may come in any order, extra columns are
// ignored, and large or dictionary-encoded strings and large lists read as
// the canonical types. Numbers must have the exact type (sample_index is
// int32, not int64): no silent narrowing. A null in a required column is
// reported with its row.
//
//	rd, err := tables.NewReader(f, size, "runs/a/trajectories.parquet", tables.Trajectories, nil)
//	for row, err := range rd.Rows(ctx) { … }        // typed rows
//	for rec, err := range rd.Records(ctx) { … }     // Arrow batches, canonical schema
//
// Readers decode one batch (ReadOptions.BatchRows, default 8,192 rows,
// fewer where those would hold more than 4 MiB) at a time;
// ReadOptions.RowGroups restricts a reader to some row groups.
//
// # Any Parquet file
//
// OpenFile reads any Parquet file, of a known table or not: its schema,
// its metadata and its rows as Arrow batches or as map[string]any (see
// Value), which is what `rlpipe cat` prints. Import turns JSONL or CSV into
// a Parquet table, conforming to a known table (errors name the line and
// column) or inferring bool, int64, float64 and string columns (values of
// a column that disagree in type are an error too, unless the column is
// one of ImportOptions.StringColumns); Export
// writes a file as JSONL or CSV.
//
// # The rescore report
//
// A rescoring commits reports/rescore.json (runs.RescoreReportPath), a
// RescoreReport whose comparison CompareRewards computes from the old and
// new rewards tables of each iteration: per-component RewardStats, the
// samples whose total moved most, the rank correlation of the totals, and
// the groups whose reward variance appears or vanishes. Its JSON names are
// part of the store's format, read by `rlpipe rescore` and the reports.
//
// # Implementation
//
// Encoding and decoding use arrow-go's pqarrow: the tables are Arrow
// schemas, batches come out as Arrow arrays ready for compute, and the
// decoder reads pages straight into Arrow buffers without a copy per
// string. Corrupt input never crashes the process: the footer is checked
// against the file size, batches are validated before use, and a panic of
// the Parquet library on the reading goroutine becomes ErrNotParquet
// (FuzzReadParquet keeps it so).
package tables
