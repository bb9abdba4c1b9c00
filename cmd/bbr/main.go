// Command bbr is igw's Body-Based Router: an Envoy ext_proc server that reads the
// model from OpenAI request bodies and sets the header HTTPRoutes match on.
package main

import (
	"log/slog"

	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/logging"
	"github.com/igw-dev/igw/pkg/bbr"
)

func main() {
	o := bbr.NewOptions()
	command.Main(command.Command{
		Name:  "bbr",
		Flags: o.AddFlags,
		Check: func() error { o.Complete(); return o.Validate() },
		Logs:  logging.RouteGRPC,
		Build: func(log *slog.Logger) (command.Process, error) { return bbr.NewRunner(o, log) },
	})
}
