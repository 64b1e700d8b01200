// Package rescore tries a new reward on stored rollouts without
// regenerating anything: it branches the store at a ref, recomputes every
// iteration's rewards from its stored trajectories with the new spec
// (memoized judge results are reused), commits, and compares old and new
// rewards — distributions per component, the samples that moved most,
// rank agreement, and the groups whose reward variance appears or
// vanishes (the groups GRPO can or cannot learn from).
package rescore
