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
	command.Main(command.Serving("epp", options.New(), routeLogs, runner.New))
}

// routeLogs puts gRPC's logs into the picker's JSON log, and client-go's and
// controller-runtime's, which the pool source and the leader election use.
func routeLogs(log *slog.Logger) {
	logging.RouteGRPC(log)
	kubelog.RouteSlog(log)
}
