// Package rescore compares rescoring throughput: one million generated
// rollouts are read from Parquet, given a weighted reward (answer
// extraction, a numeric compare against the prompt's answer, a format
// check, a length penalty) and written back as a rewards Parquet file by
// rlpipe (rewards.Program.ScoreFile), by DuckDB running the same reward
// as SQL, and by a per-row CPython function over the same rows as JSON
// lines. Every output is checked row by row against the others: a
// difference fails the benchmark. Timing never does; it prints rows per
// second and the ratios measured in the same run.
//
// See README.md for how to run it and the figures measured.
package rescore
