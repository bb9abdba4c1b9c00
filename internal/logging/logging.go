// Package logging puts what the libraries a process links log into the
// process's own JSON log (log/slog; internal/command makes it), in the same
// format, instead of in their own formats on stderr beside it: gRPC here,
// client-go and controller-runtime in package kubelog (a separate package so
// that a process without them, the BBR, does not link them).
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"google.golang.org/grpc/grpclog"
)

// RouteGRPC writes gRPC's log into log. gRPC's own variables still choose
// what it logs, as they do for its default logger:
// GRPC_GO_LOG_SEVERITY_LEVEL (error, the default; warning; info) and
// GRPC_GO_LOG_VERBOSITY_LEVEL. It must be called before gRPC is used.
func RouteGRPC(log *slog.Logger) {
	g := &grpcLogger{log: log.With("logger", "grpc"), min: slog.LevelError}
	switch strings.ToLower(os.Getenv("GRPC_GO_LOG_SEVERITY_LEVEL")) {
	case "warning":
		g.min = slog.LevelWarn
	case "info":
		g.min = slog.LevelInfo
	}
	g.verbosity, _ = strconv.Atoi(os.Getenv("GRPC_GO_LOG_VERBOSITY_LEVEL"))
	grpclog.SetLoggerV2(g)
}

// grpcLogger is grpclog.LoggerV2 over slog.
type grpcLogger struct {
	log       *slog.Logger
	min       slog.Level
	verbosity int
}

func (g *grpcLogger) emit(level slog.Level, msg string) {
	if level >= g.min {
		g.log.Log(context.Background(), level, strings.TrimSuffix(msg, "\n"))
	}
}

func (g *grpcLogger) Info(args ...any)   { g.emit(slog.LevelInfo, fmt.Sprint(args...)) }
func (g *grpcLogger) Infoln(args ...any) { g.emit(slog.LevelInfo, fmt.Sprintln(args...)) }
func (g *grpcLogger) Infof(format string, args ...any) {
	g.emit(slog.LevelInfo, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Warning(args ...any)   { g.emit(slog.LevelWarn, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningln(args ...any) { g.emit(slog.LevelWarn, fmt.Sprintln(args...)) }
func (g *grpcLogger) Warningf(format string, args ...any) {
	g.emit(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Error(args ...any)   { g.emit(slog.LevelError, fmt.Sprint(args...)) }
func (g *grpcLogger) Errorln(args ...any) { g.emit(slog.LevelError, fmt.Sprintln(args...)) }
func (g *grpcLogger) Errorf(format string, args ...any) {
	g.emit(slog.LevelError, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Fatal(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g *grpcLogger) Fatalln(args ...any)               { g.fatal(fmt.Sprintln(args...)) }
func (g *grpcLogger) Fatalf(format string, args ...any) { g.fatal(fmt.Sprintf(format, args...)) }
func (g *grpcLogger) V(l int) bool                      { return l <= g.verbosity }

// fatal logs whatever the severity setting and exits, as gRPC's logger does.
func (g *grpcLogger) fatal(msg string) {
	g.log.Error(strings.TrimSuffix(msg, "\n"))
	os.Exit(1)
}
