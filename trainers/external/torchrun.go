package external

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RankFailure is the worker process torchrun blames for a failed job: the
// "Root Cause (first observed failure)" entry torchrun prints when a
// worker exits non-zero or dies, and the worker's own last lines.
type RankFailure struct {
	// Rank is the worker's global rank, LocalRank its rank on its node.
	Rank, LocalRank int
	// ExitCode is the worker's exit status; torchrun reports a worker
	// killed by a signal as minus the signal's number.
	ExitCode int
	// Signal names that signal ("SIGKILL"), "" when the worker exited.
	Signal string
	// PID and Host are where the worker ran.
	PID  int
	Host string
	// Traceback is torchrun's traceback entry: the worker's Python
	// traceback when it records errors (torch.distributed.elastic's
	// @record, as grpo_train.py does), else "Signal 9 (SIGKILL)
	// received by PID …" or a pointer to the docs.
	Traceback string
	// Output is the worker's last lines (at most rankTailLines), picked
	// from the combined output by their "[rankN]:" prefix — which
	// grpo_train.py puts on its own lines under torchrun — or the
	// "[defaultN]:" of torchrun's --tee. Empty when none was prefixed.
	Output string
}

func (f *RankFailure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "torchrun rank %d (local rank %d, pid %d", f.Rank, f.LocalRank, f.PID)
	if f.Host != "" {
		fmt.Fprintf(&b, " on %s", f.Host)
	}
	b.WriteString(") ")
	if f.Signal != "" {
		fmt.Fprintf(&b, "was killed by signal %s", f.Signal)
	} else {
		fmt.Fprintf(&b, "exited with status %d", f.ExitCode)
	}
	return b.String()
}

// rankTailLines bounds RankFailure.Output.
const rankTailLines = 20

var (
	// The header of torchrun's report of the failure it blames.
	rootCauseRe = regexp.MustCompile(`(?m)^Root Cause \(first observed failure\):\s*$`)
	// "  rank      : 1 (local_rank: 1)"
	rankRe = regexp.MustCompile(`^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)`)
	// "  exitcode  : -9 (pid: 14070)  (SIGKILL)"
	exitRe = regexp.MustCompile(`^\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)(?:\s*\((SIG[A-Z0-9]+)\))?`)
	hostRe = regexp.MustCompile(`^\s*host\s*:\s*(\S+)`)
	// "  traceback : Signal 9 (SIGKILL) received by PID 14070", possibly
	// followed by the lines of a recorded Python traceback.
	tracebackRe = regexp.MustCompile(`^\s*traceback\s*:\s?(.*)$`)
	// The prefix of what a worker wrote, as grpo_train.py and torchrun's
	// --tee put it: "[rank1]: …" or "[default1]:…". Two ranks' writes
	// that end without a newline share a line ("…(float32)[rank1]: …"),
	// so every prefix in a line starts a rank's text.
	rankLineRe = regexp.MustCompile(`\[(?:rank|default)(\d+)\]:\s?`)
)

// parseTorchrun finds the failure torchrun blames in its output (nil when
// the output holds no torchrun report) and attaches the rank's last
// prefixed lines from rankLines.
func parseTorchrun(out string, rankLines map[int][]string) *RankFailure {
	locs := rootCauseRe.FindAllStringIndex(out, -1)
	if locs == nil {
		return nil
	}
	lines := strings.Split(out[locs[len(locs)-1][1]:], "\n")
	var f RankFailure
	found := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "=====") {
			break
		}
		if m := rankRe.FindStringSubmatch(l); m != nil {
			f.Rank, _ = strconv.Atoi(m[1])
			f.LocalRank, _ = strconv.Atoi(m[2])
			found = true
		} else if m := exitRe.FindStringSubmatch(l); m != nil {
			f.ExitCode, _ = strconv.Atoi(m[1])
			f.PID, _ = strconv.Atoi(m[2])
			f.Signal = m[3]
			if f.Signal == "" && f.ExitCode < 0 {
				f.Signal = "signal " + strconv.Itoa(-f.ExitCode)
			}
		} else if m := hostRe.FindStringSubmatch(l); m != nil {
			f.Host = m[1]
		} else if m := tracebackRe.FindStringSubmatch(l); m != nil {
			tb := []string{strings.TrimSpace(m[1])}
			// A recorded traceback runs on until the closing rule.
			for i+1 < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "=====") &&
				!strings.HasPrefix(strings.TrimSpace(lines[i+1]), "-----") {
				i++
				if s := strings.TrimRight(lines[i], " \t"); s != "" {
					tb = append(tb, s)
				}
			}
			f.Traceback = strings.TrimSpace(strings.Join(tb, "\n"))
		}
	}
	if !found {
		return nil
	}
	if ls := rankLines[f.Rank]; len(ls) > 0 {
		f.Output = strings.Join(ls, "\n")
	}
	return &f
}

// rankTails keeps each rank's last prefixed lines of a command's output.
type rankTails map[int][]string

// add records the text of each rank whose prefix starts line or stands
// in it: a line that starts with a prefix is that rank's, and each later
// prefix starts another rank's text (writes without a newline). A line
// that starts with none is no rank's.
func (r rankTails) add(line string) {
	ms := rankLineRe.FindAllStringSubmatchIndex(line, -1)
	if len(ms) == 0 || ms[0][0] != 0 {
		return
	}
	for i, m := range ms {
		end := len(line)
		if i+1 < len(ms) {
			end = ms[i+1][0]
		}
		r.addRank(line[m[2]:m[3]], line[m[1]:end])
	}
}

// addRank records text as a line of rank (its number as printed).
func (r rankTails) addRank(rank, text string) {
	n, err := strconv.Atoi(rank)
	if err != nil || (len(r) >= 1024 && r[n] == nil) {
		return
	}
	ls := append(r[n], text)
	if len(ls) > rankTailLines {
		ls = ls[len(ls)-rankTailLines:]
	}
	r[n] = ls
}

// launcherTraceback matches the traceback of torchrun's own frames that
// ends in the ChildFailedError it raises to print its report: noise once
// the report is parsed.
var launcherTraceback = regexp.MustCompile(`(?s)Traceback \(most recent call last\):\n\s*File "[^"\n]*torchrun"[^\n]*\n.*?\n[^\n]*ChildFailedError:[^\n]*\n`)

// trimLauncher drops torchrun's own traceback from an output tail.
func trimLauncher(tail string) string {
	return launcherTraceback.ReplaceAllString(tail, "")
}
