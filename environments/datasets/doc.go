// Package datasets loads datasets of verifiable problems — a question and
// a reference answer per row, as GSM8K, MATH and most RL datasets ship
// them — from JSONL or Parquet files, and puts them into the store as a
// prompts table (tables.Prompts).
//
// # Loading
//
// Load reads a file by its extension (.jsonl, .parquet); ReadJSONL and
// ReadParquet read from a reader. Each row becomes a tables.Prompt:
//
//   - Prompt is the question column ("question" unless Options.Fields says
//     "prompt", "problem", …). It must be a non-empty string.
//   - Answer is the answer column ("answer", or "solution", …), a string or
//     a number, after Options.AnswerFormat: AnswerGSM8K keeps the number
//     after the last "#### " with its commas stripped ("#### 1,234" gives
//     "1234") and moves the reasoning before it to the metadata.
//   - PromptID is the id column when Fields.ID names one, else a content
//     hash: Options.IDPrefix followed by the first 16 hex digits of the
//     SHA-256 of the question, a NUL byte and the raw answer. Ids must be
//     unique in a file.
//   - Metadata is a JSON object holding "reasoning" (AnswerGSM8K) and every
//     other column of the row, as is.
//   - Source and Split come from Options (Source defaults to the file's
//     base name without extension, Split to "train").
//
// A row that does not fit fails the load with a *RowError naming the file,
// the line (JSONL, from 1) or row (Parquet, from 0) and the column:
//
//	load gsm8k.jsonl line 3 column "answer": no "#### <number>" final answer
//
// # Into the store
//
// Put writes rows as a prompts table (Parquet) at a path on a branch with
// provenance metadata, and commits; Import does Load and Put, recording the
// source file's digest as the provenance input:
//
//	c, n, err := datasets.Import(ctx, st, "main", "data/gsm8k/train.parquet",
//		"gsm8k/train.jsonl", &datasets.ImportOptions{
//			Load: datasets.Options{AnswerFormat: datasets.AnswerGSM8K, Source: "gsm8k"},
//		})
//
// # Hugging Face datasets
//
// OpenHF finds a split of a dataset the Hugging Face datasets package
// saved (save_to_disk: Arrow stream files, a Dataset or a DatasetDict) or
// of a dataset repository snapshot (data/<split>-*.parquet); Load maps
// its columns like any file's, Fields.Messages reading a chat column as
// the prompt's messages; ImportHF puts it in the store. The rows' source
// names the dataset and its revision (a snapshot's commit, or the
// fingerprint save_to_disk recorded):
//
//	d, err := datasets.OpenHF("gsm8k-saved", &datasets.HFOptions{Split: "test"})
//	rows, err := d.Load(&datasets.Options{AnswerFormat: datasets.AnswerGSM8K})
//	// rows[0].Source == "gsm8k@927e62ed89494b91"
//
// # reasoning-gym
//
// Gym generates problems with the reasoning-gym package's own
// generators, in the interpreter GymOptions.Python names (the project
// venv), by a script embedded in the binary (reasoninggym.py) that
// streams JSON lines; it runs outside the sandbox, as the package's own
// code. Each family (ParseGymFamilies: "chain_sum,basic_arithmetic:3")
// gets its weighted share of each split by the largest remainder, and
// draws in the order of reasoning-gym's indices with the seed: its
// held-out rows first, then its training rows, skipping any question
// already drawn, so the splits share no question. The rows keep
// reasoning-gym's metadata (source_dataset, source_index, …), which a
// reward reads to call the family's score_answer
// (examples/reasoning-gym). Problems with the request (an unknown family
// or config key, a config the family refuses, too few distinct
// questions) are *GymError naming the flag and the next step:
//
//	fams, _ := datasets.ParseGymFamilies("chain_sum")
//	_ = datasets.SetGymConfig(fams, "max_terms=3")
//	set, err := datasets.Gym(ctx, &datasets.GymOptions{Python: ".venv-py/bin/python",
//		Families: fams, Size: 1000, HeldOut: 100, Seed: 1})
//	// set.HeldOut[0].Prompt: reasoning_gym.create_dataset("chain_sum", seed=1, max_terms=3)[0]["question"]
package datasets
