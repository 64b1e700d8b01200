package skyrlgym

// WorkerOf is the worker Open with o and dir uses, for tests that count
// its restarts.
func WorkerOf(o *Options, dir string) (*Worker, error) {
	r, err := resolve(o, dir)
	if err != nil {
		return nil, err
	}
	return workerFor(r.setup), nil
}
