// Package reports turns a run branch into what a person reads: training
// health per iteration, reward-hacking alarms and one self-contained HTML
// report.
//
// Everything is computed from the store, not from logs: Load reads each
// iteration's trajectories and rewards tables (and its train metrics file
// for the optimizer figures), computes its Health with ComputeHealth, and
// reads the evaluations (evals/NNNNNN/<set>/summary.parquet). Detect runs
// the alarm rules over the health and eval series; Build and HTML bundle
// them into a Report:
//
//	html, err := reports.HTML(ctx, st, "runs-arith", nil)
//	rep, err := reports.WriteHTML(ctx, st, "runs-arith", "report-arith.html",
//		&reports.Options{Compare: "rescore-1a2b3c"})
//	for _, a := range rep.Alarms { fmt.Println(a.Rule, a.Iteration, a.Message) }
//
// ComputeHealth and Detect are pure functions: tests give them hand-made
// tables and series. The health rows are also a Parquet table
// (WriteHealth, HealthSchema; SaveHealth puts it at reports/health.parquet
// on a branch) that DuckDB and pandas open.
//
// Reports are deterministic: the same store content gives the same bytes
// (the only date shown is the commit's), so they can be golden-tested and
// diffed. Charts are inline SVG drawn here, in figures whose title,
// legend and plot never overlap, on axes that cover the data; series equal
// point for point are drawn once with a note. The page loads nothing and
// runs no script. docs/REPORTS.md defines every health metric and alarm
// rule with its threshold.
package reports
