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

// Queued is how many requests are in flight on the worker's running
// process (run directly): the one being served and those behind it.
func (w *Worker) Queued() int {
	w.mu.Lock()
	c, _ := w.cur.(*pipeConn)
	w.mu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}
