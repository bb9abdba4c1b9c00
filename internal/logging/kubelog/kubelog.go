// Package kubelog writes what client-go (klog) and controller-runtime log into
// a process's own log. Without it client-go writes klog's text lines on stderr
// beside the JSON log, and controller-runtime drops its log and, after 30
// seconds, prints a stack trace saying so.
package kubelog

import (
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Route makes l the logger of klog and controller-runtime. Call it once, at
// start-up, before either logs: both are process-wide.
func Route(l logr.Logger) {
	klog.SetLogger(l)
	ctrllog.SetLogger(l)
}

// RouteSlog is Route for a process that logs through log/slog.
func RouteSlog(log *slog.Logger) { Route(logr.FromSlogHandler(log.Handler())) }
