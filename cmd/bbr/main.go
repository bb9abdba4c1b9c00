// Command bbr is igw's Body-Based Router: an Envoy ext_proc server that reads the
// model from OpenAI request bodies and sets the header HTTPRoutes match on.
package main

import (
	"github.com/igw-dev/igw/internal/command"
	"github.com/igw-dev/igw/internal/logging"
	"github.com/igw-dev/igw/pkg/bbr"
)

func main() {
	command.Main(command.Serving("bbr", bbr.NewOptions(), logging.RouteGRPC, bbr.NewRunner))
}
