package temporalrun

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/log"
)

// Logger adapts a zerolog logger to the Temporal SDK's, so that the
// SDK's messages go where rlpipe's go (and through the same redaction).
func Logger(z zerolog.Logger) log.Logger { return zlog{z: z} }

// QuietAfter is Logger until ctx is done; from then on the SDK's
// messages are debug lines. A process that stops (Ctrl-C) says so in one
// plain line of its own, not in the SDK's warnings and errors about the
// polls and activities it cut short.
func QuietAfter(ctx context.Context, z zerolog.Logger) log.Logger {
	return zlog{z: z, quiet: ctx.Done()}
}

type zlog struct {
	z     zerolog.Logger
	quiet <-chan struct{} // closed: everything is Debug
}

func (l zlog) Debug(msg string, kv ...any) { l.emit(zerolog.DebugLevel, msg, kv) }
func (l zlog) Info(msg string, kv ...any)  { l.emit(zerolog.InfoLevel, msg, kv) }
func (l zlog) Warn(msg string, kv ...any)  { l.emit(zerolog.WarnLevel, msg, kv) }
func (l zlog) Error(msg string, kv ...any) { l.emit(zerolog.ErrorLevel, msg, kv) }

func (l zlog) emit(level zerolog.Level, msg string, kv []any) {
	select {
	case <-l.quiet:
		level = zerolog.DebugLevel
	default:
	}
	e := l.z.WithLevel(level)
	if e == nil {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e = e.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	e.Str("component", "temporal").Msg(msg)
}
