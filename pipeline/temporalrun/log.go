package temporalrun

import (
	"fmt"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/log"
)

// Logger adapts a zerolog logger to the Temporal SDK's, so that the
// SDK's messages go where rlpipe's go (and through the same redaction).
func Logger(z zerolog.Logger) log.Logger { return zlog{z} }

type zlog struct{ z zerolog.Logger }

func (l zlog) Debug(msg string, kv ...any) { l.emit(l.z.Debug(), msg, kv) }
func (l zlog) Info(msg string, kv ...any)  { l.emit(l.z.Info(), msg, kv) }
func (l zlog) Warn(msg string, kv ...any)  { l.emit(l.z.Warn(), msg, kv) }
func (l zlog) Error(msg string, kv ...any) { l.emit(l.z.Error(), msg, kv) }

func (l zlog) emit(e *zerolog.Event, msg string, kv []any) {
	if e == nil {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e = e.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	e.Str("component", "temporal").Msg(msg)
}
