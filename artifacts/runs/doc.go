// Package runs owns the layout of a run branch: where a run keeps each
// thing it records, and the typed readers of those records. It is the
// contract between the engine that writes a run and everything that reads
// one (the CLI, the UI, reports, rescoring, notebooks); no other package
// spells a run path.
//
// A run named NAME lives on the branch runs-NAME (Branch):
//
//	run/config.yaml                        ConfigPath: the effective config, secrets redacted
//	run/state.json                         StatePath: State, the loop's durable state
//	iterations/000007/prompts.parquet      IterationPath(7, PromptsFile), and so on for
//	iterations/000007/trajectories.parquet   every table of the iteration
//	iterations/000007/train_metrics.json   read by ReadTrainMetrics
//	iterations/000007/adapter/             AdapterPath(7): the checkpoint
//	events/000007.jsonl                    EventsPath(7): the iteration's event stream
//	events/000007.metrics.json             MetricsPath(7): IterationMetrics
//	evals/000007/<set>/summary.parquet     EvalPath(7, set, SummaryFile): read by ReadEvals
//	reports/health.parquet                 HealthReportPath
//	reports/rescore.json                   RescoreReportPath
//
// Every iteration's commit carries the metadata MetaRun, MetaIteration
// and MetaConfigHash; History walks a branch's iteration commits by them,
// and List lists the runs of a store.
//
// Readers take a ref, so they read a run's head, one of its commits, a tag
// or a rescore branch alike:
//
//	evals, err := runs.ReadEvals(ctx, st, runs.Branch("arith"))
//	for _, e := range evals {
//		fmt.Println(e.Checkpoint, e.Set, e.Metrics["pass@1"], e.Intervals["pass@1"])
//	}
//
// docs/FORMAT.md describes the same layout for readers outside Go. The
// notebooks' helper, notebooks/rlpipe_data.py, holds its Python copy in one
// section (constants and builders with the same names, snake-cased), the
// only Python that spells a run path: TestNotebookLayoutMirrorsRuns
// compares the two, and TestNoNotebookSpellsARunPath keeps run paths out
// of the notebooks' cells.
package runs
