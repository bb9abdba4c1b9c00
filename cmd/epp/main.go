// Command epp is igw's Endpoint Picker: an Envoy ext_proc server that routes
// each inference request to the model-server pod predicted to answer first.
package main

import (
	"log/slog"

	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/logging"
	"github.com/igw-dev/igw/internal/logging/kubelog"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/runner"
)

func main() {
	o := options.New()
	command.Main(command.Command{
		Name:  "epp",
		Flags: o.AddFlags,
		Check: func() error { o.Complete(); return o.Validate() },
		// The pool source and the leader election are client-go and
		// controller-runtime: their logs join the picker's JSON log, as do
		// gRPC's.
		Logs: func(log *slog.Logger) {
			logging.RouteGRPC(log)
			kubelog.RouteSlog(log)
		},
		Build: func(log *slog.Logger) (command.Process, error) { return runner.New(o, log) },
	})
}
