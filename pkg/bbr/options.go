package bbr

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servingtls"
)

// Options configure one router process (cmd/bbr's command line).
type Options struct {
	GRPCPort    int
	HealthPort  int
	MetricsPort int
	// ModelsPort serves GET /v1/models, the OpenAI model list of ModelListFile.
	ModelsPort int
	// BindAddress is the address every port listens on ("" for all interfaces).
	BindAddress string

	MaxRequestBodyBytes int64
	DefaultModel        string
	// AdapterMappingFile is the operator-rendered adapter → base model file ("" for none).
	AdapterMappingFile string
	// ModelListFile is the operator-rendered list of served models and
	// adapters that ModelsPort answers with ("" for none: an empty list).
	ModelListFile string
	// AdapterMappingPollInterval is how often both files are re-read.
	AdapterMappingPollInterval time.Duration
	// BodyMode is "buffered" or "streamed", as Envoy's ext_proc filter is configured.
	BodyMode string
	// TLS is the ext_proc port's serving certificate (none: plaintext).
	TLS servingtls.Files
}

// Defaults of the flags.
const (
	DefaultGRPCPort            = 9004
	DefaultHealthPort          = 9005
	DefaultMetricsPort         = 9091
	DefaultModelsPort          = 9006
	DefaultMaxRequestBodyBytes = 4 << 20 // the InferenceGatewayConfig default
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		GRPCPort: DefaultGRPCPort, HealthPort: DefaultHealthPort, MetricsPort: DefaultMetricsPort, ModelsPort: DefaultModelsPort,
		MaxRequestBodyBytes:        DefaultMaxRequestBodyBytes,
		AdapterMappingPollInterval: time.Second,
		BodyMode:                   string(Streamed),
	}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.listen().AddFlags(fs)
	o.TLS.AddFlags(fs, "the ext_proc port (--grpc-port)")
	fs.IntVar(&o.ModelsPort, "models-port", o.ModelsPort, "Port of GET /v1/models over HTTP: the OpenAI model list of --model-list-file.")
	fs.Int64Var(&o.MaxRequestBodyBytes, "max-request-body-bytes", o.MaxRequestBodyBytes, "Largest JSON request body accepted; larger ones get 413.")
	fs.StringVar(&o.DefaultModel, "default-model", o.DefaultModel, "Model for JSON bodies without one (empty: such bodies get 400).")
	fs.StringVar(&o.AdapterMappingFile, "adapter-mapping-file", o.AdapterMappingFile, "YAML file mapping LoRA adapter names to base models (\"adapters: {name: base}\"); reloaded when it changes.")
	fs.StringVar(&o.ModelListFile, "model-list-file", o.ModelListFile, "YAML file listing the served models and adapters (\"models: [{id: name, parent: base}]\") that --models-port answers with; reloaded when it changes. Empty: an empty list.")
	fs.DurationVar(&o.AdapterMappingPollInterval, "adapter-mapping-poll-interval", o.AdapterMappingPollInterval, "How often the adapter mapping and model list files are re-read.")
	fs.StringVar(&o.BodyMode, "body-mode", o.BodyMode, "Request body mode of Envoy's ext_proc filter: buffered or streamed (FULL_DUPLEX_STREAMED). A mode Envoy announces overrides it.")
}

// listen is what the BBR listens on.
func (o *Options) listen() serve.Listen {
	return serve.ExtProcListen(&o.GRPCPort, &o.HealthPort, &o.MetricsPort, &o.BindAddress)
}

// Complete normalizes the options: the body mode may also be given by Envoy's
// name for it.
func (o *Options) Complete() {
	o.BodyMode = strings.ToLower(strings.TrimSpace(o.BodyMode))
	if o.BodyMode == "full_duplex_streamed" {
		o.BodyMode = string(Streamed)
	}
}

// Validate rejects inconsistent options.
func (o *Options) Validate() error {
	errs := o.listen().Check(serve.Port{Flag: "--models-port", Port: o.ModelsPort})
	if o.MaxRequestBodyBytes <= 0 {
		errs = append(errs, errors.New("--max-request-body-bytes must be positive"))
	}
	if o.AdapterMappingPollInterval <= 0 {
		errs = append(errs, errors.New("--adapter-mapping-poll-interval must be positive"))
	}
	if o.DefaultModel != "" {
		if e := checkModelName(o.DefaultModel); e != nil {
			errs = append(errs, fmt.Errorf("--default-model: %s", e.Message))
		}
	}
	if _, err := ParseBodyMode(o.BodyMode); err != nil {
		errs = append(errs, fmt.Errorf("--body-mode: %w", err))
	}
	if err := o.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
