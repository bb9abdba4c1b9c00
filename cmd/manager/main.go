// Command manager is the igw operator.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/igw-dev/igw/internal/logging/kubelog"
	"github.com/igw-dev/igw/internal/version"
	"github.com/igw-dev/igw/pkg/manager"
)

func main() {
	opts := manager.NewOptions()
	zapOpts := zap.Options{}
	opts.AddFlags(flag.CommandLine)
	zapOpts.BindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, version.FlagUsage)
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String("manager"))
		return
	}
	// client-go logs through klog: both into the one zap log.
	kubelog.Route(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := manager.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}
