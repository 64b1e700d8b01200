// Package rescore tries a new reward on stored rollouts without
// regenerating anything: it branches the store at a ref, recomputes every
// iteration's rewards from its stored trajectories with the new spec
// (memoized judge results are reused), commits, and compares old and new
// rewards — distributions per component, the samples that moved most,
// rank agreement, and the groups whose reward variance appears or
// vanishes (the groups GRPO can or cannot learn from).
//
// The spec is compiled once, by the caller, and every iteration is
// scored with that program:
//
//	prog, err := runners.Compile(spec) // type errors before touching the store
//	rep, err := rescore.Run(ctx, st, rescore.Options{From: "runs-exp1", Reward: prog})
//
// Advantages does the same for advantage estimators: one iteration of a
// run keeps its rewards and gets its advantages recomputed under another
// estimator (the loop's own advantages task, the run's other options), on
// a new branch, compared with the stored ones (tables.CompareAdvantages):
//
//	rep, err := rescore.Advantages(ctx, st, rescore.AdvantagesOptions{From: "runs-exp1", Estimator: "rloo", Estimators: reg.Estimators})
//
// The comparison and the report committed beside the new rewards
// (reports/rescore.json) are a schema of their own, in artifacts/tables
// (tables.CompareRewards, tables.RescoreReport), so that the reports and
// the CLI read them without depending on this stage.
package rescore
