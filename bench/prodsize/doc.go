// Package prodsize measures a production-size iteration through the
// store: 8,192 trajectories of 2,048 completion tokens, their token ids
// and logprobs (about 130 MB of raw numbers), on the path a real
// iteration's trajectories take. The generate stage writes
// trajectories.parquet with the tables writer (tables.WriteFile, as
// rollouts does), the executor stages the file on a branch (PutObject)
// and commits, the train stage's executor downloads it (GetObject) and
// the trainer reads it (tables.ReadFile, as pipeline.ReadInput does).
//
// The floor is pyarrow: testdata/floor.py writes the same table (read
// from rlpipe's file, untimed) with pyarrow.parquet's writer under the
// same compression (zstd level 1, dictionary encoding on the same
// columns) and reads it back, timed inside Python, on the same disk.
// The benchmark reports rlpipe/pyarrow for the embedded store and for
// lakeFS (the storeserver on the loopback), and the peak heap of each
// phase. It needs the venv of scripts/py-venv.sh and is skipped, saying
// so, without one.
//
//	go test -run '^$' -bench ProductionIteration -benchtime 1x ./bench/prodsize/
package prodsize
