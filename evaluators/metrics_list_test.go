package evaluators

import "github.com/rlpipe/rlpipe/pipeline/kind"

// shipped are the metrics rlpipe registers (cli/kinds), in another order
// than the rows': Summarize sorts them.
var shipped = kind.Metrics{PassHatKMetric, AvgAtK, PassAtKMetric, MajAtKMetric}
