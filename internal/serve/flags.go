package serve

import (
	"fmt"

	"github.com/spf13/pflag"
)

// ExtProcPorts are the ports every ext_proc process (the BBR, the EPP) has.
type ExtProcPorts struct {
	GRPC, Health, Metrics *int
	// BindAddress is the address every port listens on.
	BindAddress *string
}

// AddFlags registers --grpc-port, --health-port, --metrics-port and --bind-address.
func (p ExtProcPorts) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(p.GRPC, "grpc-port", *p.GRPC, "Port of the ext_proc gRPC service.")
	fs.IntVar(p.Health, "health-port", *p.Health, "Port of the gRPC health service (grpc.health.v1).")
	fs.IntVar(p.Metrics, "metrics-port", *p.Metrics, "Port of /metrics, /healthz and /readyz over HTTP.")
	fs.StringVar(p.BindAddress, "bind-address", *p.BindAddress, "Address to listen on (empty: all interfaces).")
}

// Ports returns the three ports for CheckPorts, before a process's own.
func (p ExtProcPorts) Ports(more ...Port) []Port {
	return append([]Port{{"--grpc-port", *p.GRPC}, {"--health-port", *p.Health}, {"--metrics-port", *p.Metrics}}, more...)
}

// Port is a port option: its flag and its value.
type Port struct {
	Flag string
	Port int
}

// CheckPorts reports, in order, every port out of range and every port equal
// to an earlier one; 0 (any free port) may repeat.
func CheckPorts(ports []Port) []error {
	var errs []error
	seen := map[int]string{}
	for _, p := range ports {
		if p.Port < 0 || p.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is out of range", p.Flag, p.Port))
		}
		if other, dup := seen[p.Port]; dup && p.Port != 0 {
			errs = append(errs, fmt.Errorf("%s and %s are both %d", other, p.Flag, p.Port))
		}
		seen[p.Port] = p.Flag
	}
	return errs
}
