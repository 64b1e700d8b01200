package local_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
)

func TestConformance(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T) artifacts.Store { return artifactstest.NewLocal(t) })
}
