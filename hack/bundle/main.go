// Command bundle writes the OLM bundle (bundle/) from config/manifests: `make bundle`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/igw-dev/igw/internal/bundle"
)

func main() {
	opts := bundle.Options{Root: ".", OutDir: "bundle"}
	channels := "alpha"
	flag.StringVar(&opts.Version, "version", bundle.DefaultVersion, "operator version (semver)")
	flag.StringVar(&channels, "channels", channels, "comma-separated channels; the first is the default")
	flag.StringVar(&opts.OutDir, "out", opts.OutDir, "bundle directory")
	flag.Parse()
	opts.Channels = strings.Split(channels, ",")
	if err := bundle.Generate(opts); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
	if errs := bundle.Validate(opts.OutDir); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "bundle:", err)
		}
		os.Exit(1)
	}
}
