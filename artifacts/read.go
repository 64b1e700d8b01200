package artifacts

import (
	"context"
	"errors"
	"io"
)

// ReadObject reads a whole object. A missing one is nil, nil: for the
// files a reader may find or not (a run's state, an iteration's metrics).
func ReadObject(ctx context.Context, st Store, ref, path string) ([]byte, error) {
	rc, _, err := st.GetObject(ctx, ref, path)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
