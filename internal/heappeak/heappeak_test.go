package heappeak

import (
	"runtime"
	"testing"
	"time"
)

// TestLiveSeesWhatIsHeld holds 32 MiB between two measurements: Live
// counts it while it is referenced and not once it is dropped, and a
// collecting Sampler's peak includes it.
func TestLiveSeesWhatIsHeld(t *testing.T) {
	const size = 32 << 20
	s := StartCollecting(time.Hour) // samples at Start and Stop only
	base := Live()
	buf := make([]byte, size)
	held := int64(Live()) - int64(base)
	s.Sample()
	runtime.KeepAlive(buf)
	after := int64(Live()) - int64(base)
	peak := int64(s.Stop()) - int64(s.Base())
	// Within 1 MiB: the rest of the heap moves a little (the test
	// framework's own objects).
	if held < size-1<<20 || held > size+1<<20 {
		t.Errorf("held %d bytes with a %d-byte buffer referenced, want %d to %d", held, size, size-1<<20, size+1<<20)
	}
	if after > 1<<20 {
		t.Errorf("held %d bytes after the buffer was dropped, want under %d", after, 1<<20)
	}
	if peak < size-1<<20 {
		t.Errorf("sampler's peak %d bytes above its base, want at least %d", peak, size-1<<20)
	}
}
