// Command bundle writes the OLM bundle (bundle/) from config/manifests and
// the API types' markers, and checks it: `make bundle`. With --catalog it
// writes the file-based catalog of that bundle instead: `make catalog`.
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
	channels := strings.Join(bundle.DefaultChannels, ",")
	catalog := ""
	flag.StringVar(&opts.Version, "version", bundle.DefaultVersion, "operator version (semver)")
	flag.StringVar(&channels, "channels", channels, "comma-separated channels; the first is the default")
	flag.StringVar(&opts.OutDir, "out", opts.OutDir, "bundle directory")
	flag.StringVar(&catalog, "catalog", "", "write the file-based catalog of the bundle in --out into this directory, instead of the bundle")
	flag.Parse()
	if catalog != "" {
		image := bundle.BundleRepository + ":" + opts.Version
		if err := bundle.GenerateCatalog(opts.OutDir, catalog, image); err != nil {
			fail(err)
		}
		if errs := bundle.ValidateCatalog(catalog); len(errs) > 0 {
			fail(errs...)
		}
		return
	}
	opts.Channels = strings.Split(channels, ",")
	if err := bundle.Generate(opts); err != nil {
		fail(err)
	}
	errs, warns := bundle.Check(opts.OutDir)
	for _, w := range warns {
		fmt.Fprintln(os.Stderr, "bundle: warning:", w)
	}
	if len(errs) > 0 {
		fail(errs...)
	}
}

func fail(errs ...error) {
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, "bundle:", err)
	}
	os.Exit(1)
}
