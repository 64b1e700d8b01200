package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/rlpipe/rlpipe/artifacts"
)

func convertTable(ctx context.Context, st artifacts.Store, a artifactArg, format string, w io.Writer) (int64, error) {
	return 0, fmt.Errorf("export %s as %s: %w", a, format, artifacts.ErrNotSupported)
}
