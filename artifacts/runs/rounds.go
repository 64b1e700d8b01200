package runs

import "fmt"

// Dynamic sampling's records (the file's filter_groups section): each
// generation round of an iteration keeps its prompts, trajectories and
// rewards under RoundDir, and the iteration's own prompts, trajectories
// and rewards are the groups the rounds kept, with FilterGroupsFile
// saying which and why.
const (
	// FilterGroupsFile records an iteration's rounds: the cursor and
	// prompts of each, its informative groups, and why the rounds
	// stopped.
	FilterGroupsFile = "filter_groups.json"
	// RoundsDir is the directory of the rounds in an iteration's.
	RoundsDir = "rounds"
)

// RoundDir is round r of iteration n's directory (round 0 is the first
// generation batch): "iterations/000007/rounds/01".
func RoundDir(n, r int) string { return fmt.Sprintf("%s/%s/%02d", IterationDir(n), RoundsDir, r) }
