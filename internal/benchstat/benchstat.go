// Package benchstat holds the one statistic the benchmarks print of
// their rounds: the median, which a shared machine's slow round moves
// less than a mean.
//
//	ratios := []float64{1.38, 1.51, 1.36}
//	fmt.Printf("%.2f", benchstat.Median(ratios)) // 1.38
//
// It imports nothing of the module.
package benchstat

import "slices"

// Median is the middle of xs, or the mean of its two middle values when
// their number is even; 0 for none. xs is left as it was.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
