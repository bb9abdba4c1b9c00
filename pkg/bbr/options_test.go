package bbr

import (
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/command"
)

func parse(args ...string) (*Options, error) {
	o := NewOptions()
	return o, command.ParseOptions("bbr", o, args)
}

func TestOptionDefaults(t *testing.T) {
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if o.GRPCPort != 9004 || o.ModelsPort != 9006 || o.MaxRequestBodyBytes != 4<<20 || o.BodyMode != "streamed" || o.DefaultModel != "" ||
		o.AdapterMappingFile != "" || o.ModelListFile != "" {
		t.Fatalf("defaults %+v", o)
	}
}

func TestOptionFlags(t *testing.T) {
	o, err := parse("--grpc-port=1", "--health-port=2", "--metrics-port=3", "--models-port=4", "--max-request-body-bytes=1024",
		"--default-model=llama", "--adapter-mapping-file=/etc/bbr/adapters.yaml", "--model-list-file=/etc/bbr/models.yaml",
		"--adapter-mapping-poll-interval=2s", "--body-mode=FULL_DUPLEX_STREAMED")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{GRPCPort: 1, HealthPort: 2, MetricsPort: 3, ModelsPort: 4, MaxRequestBodyBytes: 1024, DefaultModel: "llama",
		AdapterMappingFile: "/etc/bbr/adapters.yaml", ModelListFile: "/etc/bbr/models.yaml", AdapterMappingPollInterval: 2 * time.Second,
		BodyMode: "streamed"}
	if *o != want {
		t.Fatalf("parsed %+v\nwant   %+v", *o, want)
	}
	if o, err := parse("--body-mode", "Buffered"); err != nil || o.BodyMode != "buffered" {
		t.Fatalf("%+v %v", o, err)
	}
}

func TestOptionValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--body-mode=chunked"}, "--body-mode"},
		{[]string{"--max-request-body-bytes=0"}, "--max-request-body-bytes must be positive"},
		{[]string{"--grpc-port=70000"}, "--grpc-port 70000 is out of range"},
		{[]string{"--health-port=9004"}, "--grpc-port and --health-port are both 9004"},
		{[]string{"--models-port=-1"}, "--models-port -1 is out of range"},
		{[]string{"--models-port=9091"}, "--metrics-port and --models-port are both 9091"},
		{[]string{"--adapter-mapping-poll-interval=0s"}, "--adapter-mapping-poll-interval must be positive"},
		{[]string{"--default-model=a\tb"}, "--default-model"},
	} {
		_, err := parse(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// Port 0 (any free port) may repeat: tests and in-process use rely on it.
	if _, err := parse("--grpc-port=0", "--health-port=0", "--metrics-port=0", "--models-port=0"); err != nil {
		t.Fatal(err)
	}
}
