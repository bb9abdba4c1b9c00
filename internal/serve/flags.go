package serve

import (
	"fmt"

	"github.com/spf13/pflag"
)

// PortFlag is one listening port's flag: its name (without "--"), the
// option it sets and what the port serves.
type PortFlag struct {
	Name  string
	Value *int
	Usage string
}

// Listen is a process's listening options: its ports and the one address
// they all listen on.
type Listen struct {
	Ports       []PortFlag
	BindAddress *string
	// BindUsage describes --bind-address (default: empty means every interface).
	BindUsage string
}

// ExtProcListen is what every ext_proc process (the BBR, the EPP) listens
// on: --grpc-port, --health-port, --metrics-port and --bind-address.
func ExtProcListen(grpc, health, metrics *int, bindAddress *string) Listen {
	return Listen{Ports: []PortFlag{
		{"grpc-port", grpc, "Port of the ext_proc gRPC service."},
		{"health-port", health, "Port of the gRPC health service (grpc.health.v1)."},
		{"metrics-port", metrics, "Port of /metrics, /healthz and /readyz over HTTP."},
	}, BindAddress: bindAddress}
}

// AddFlags registers each port's flag and --bind-address.
func (l Listen) AddFlags(fs *pflag.FlagSet) {
	for _, p := range l.Ports {
		fs.IntVar(p.Value, p.Name, *p.Value, p.Usage)
	}
	usage := l.BindUsage
	if usage == "" {
		usage = "Address to listen on (empty: all interfaces)."
	}
	fs.StringVar(l.BindAddress, "bind-address", *l.BindAddress, usage)
}

// Check is CheckPorts of l's ports followed by more (a process's optional ones).
func (l Listen) Check(more ...Port) []error {
	ports := make([]Port, 0, len(l.Ports)+len(more))
	for _, p := range l.Ports {
		ports = append(ports, Port{Flag: "--" + p.Name, Port: *p.Value})
	}
	return CheckPorts(append(ports, more...))
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
