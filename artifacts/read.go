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

// RangeReaderAt reads the object ref:path through rr in ranges, as the
// io.ReaderAt a Parquet reader wants for an object too large to fetch
// whole: each ReadAt is one GetObjectRange bounded by ctx. A read that
// runs past the object's end returns the bytes there are and io.EOF.
func RangeReaderAt(ctx context.Context, rr RangeReader, ref, path string) io.ReaderAt {
	return &rangeReaderAt{ctx: ctx, rr: rr, ref: ref, path: path}
}

type rangeReaderAt struct {
	ctx       context.Context // io.ReaderAt takes none: the reader's owner bounds its reads
	rr        RangeReader
	ref, path string
}

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	rc, err := r.rr.GetObjectRange(r.ctx, r.ref, r.path, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}
