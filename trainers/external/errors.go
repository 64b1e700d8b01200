package external

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
)

// Errors of the external trainer, tested with errors.Is. A trainer that
// exits with a non-zero status fails with an *ExitError.
var (
	// ErrOptions: an option cannot work; the message names it.
	ErrOptions = errors.New("invalid external trainer options")
	// ErrContract: the trainer exited 0 but its outputs break the
	// contract (a missing file, an adapter that is not a PEFT LoRA
	// directory, metrics that are not a JSON object). It wraps
	// pipeline.ErrOutput, and the task fails at once (Permanent): the
	// same script would write the same outputs again.
	ErrContract = fmt.Errorf("external trainer broke the contract (see docs/TRAINERS.md): %w", pipeline.ErrOutput)
	// ErrBatch: the prompts, trajectories and rewards of an iteration do
	// not fit together (a reward for a sample that was never generated).
	// It is advantages.ErrBatch, which the join of the tables returns.
	ErrBatch = advantages.ErrBatch
	// ErrPolicy: the policy input (the previous adapter) is not a PEFT
	// LoRA directory.
	ErrPolicy = errors.New("policy input is not a PEFT LoRA adapter")
)

// Exit statuses of the contract. Any other non-zero status (a crash, an
// out-of-memory kill, a lost node) is retried as the task environment's
// retries say; these three fail the task at once.
const (
	// ExitUsage is argparse's status for flags it cannot parse: the
	// script and rlpipe disagree about the contract.
	ExitUsage = 2
	// ExitDataErr (sysexits EX_DATAERR): the inputs cannot be trained on
	// (inconsistent tables, a non-finite loss).
	ExitDataErr = 65
	// ExitConfig (sysexits EX_CONFIG): the hyperparameters are invalid.
	ExitConfig = 78
)

// ExitError is the error of a trainer that exited with a non-zero status
// or was killed by a signal.
type ExitError struct {
	// Command is the argv that ran, the contract's flags included.
	Command []string
	// Code is the exit status, or -1 when a signal killed the process.
	Code int
	// Signal names the signal that killed the process ("" otherwise).
	Signal string
	// Tail is the end of the trainer's stderr (its stdout when stderr was
	// empty), secret values of its environment replaced by <redacted>.
	Tail string
	// Rank, when the trainer ran under torchrun and a worker failed, is
	// the worker torchrun blames, with its own last lines. torchrun
	// itself exits 1 whatever the worker's status, so Permanent looks at
	// the worker's.
	Rank *RankFailure
}

func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != "" {
		fmt.Fprintf(&b, "external trainer killed by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "external trainer exited with status %d", e.Code)
		if e.Rank == nil {
			b.WriteString(statusMeaning(e.Code))
		}
	}
	if f := e.Rank; f != nil {
		fmt.Fprintf(&b, ": %s", f)
		if f.Signal == "" {
			b.WriteString(statusMeaning(f.ExitCode))
		}
		if f.Output != "" {
			fmt.Fprintf(&b, "\nrank %d's last output:\n%s", f.Rank, f.Output)
		}
		if f.Traceback != "" {
			fmt.Fprintf(&b, "\nrank %d's traceback (torchrun):\n%s", f.Rank, f.Traceback)
		}
		if f.Signal != "" {
			b.WriteString("\n(a worker killed by a signal: out of memory, a lost node, or stopped from outside; the call is retried)")
		}
	}
	fmt.Fprintf(&b, "\ncommand: %s", shellJoin(e.Command))
	if e.Tail != "" {
		fmt.Fprintf(&b, "\nlast output:\n%s", e.Tail)
	}
	return b.String()
}

// statusMeaning says what a contract status means, " (…)", or "".
func statusMeaning(code int) string {
	switch code {
	case ExitUsage:
		return " (usage: the script rejected the contract's flags)"
	case ExitDataErr:
		return " (data error: the batch cannot be trained on)"
	case ExitConfig:
		return " (configuration error: check the hyperparameters)"
	}
	return ""
}

// Permanent reports whether retrying cannot help: the status is one of
// ExitUsage, ExitDataErr and ExitConfig — the status of the worker
// torchrun blames, when it ran under torchrun.
func (e *ExitError) Permanent() bool {
	code := e.Code
	if e.Rank != nil {
		code = e.Rank.ExitCode
	}
	return code == ExitUsage || code == ExitDataErr || code == ExitConfig
}

// shellJoin quotes an argv for display, as a shell would need it.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = a
		} else {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}
