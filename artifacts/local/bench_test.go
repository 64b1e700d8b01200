package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func BenchmarkPutObjectSequential(b *testing.B) {
	s, err := newBenchStore(b)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := fmt.Sprintf("x/%08d", i)
		if _, err := s.PutObject(context.Background(), "main", p, strings.NewReader(p), nil); err != nil {
			b.Fatal(err)
		}
	}
}
