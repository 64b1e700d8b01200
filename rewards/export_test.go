package rewards

// Compilations returns how many specs have been compiled (by Compile or
// Check) since the test binary started.
func Compilations() int64 { return compilations.Load() }
