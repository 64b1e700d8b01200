//go:build !amd64

package sandbox

// archFilter has no table here: seccompProgram refuses to build a filter.
func archFilter() (seccompArch, bool) { return seccompArch{}, false }
