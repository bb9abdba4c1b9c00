package gateway

import (
	"context"

	"github.com/igw-dev/igw/pkg/globalsummary"
)

// newSummary makes the gateway's member summary for the global tier's hub,
// as a member cluster's endpoint pickers export theirs: one entry per model
// each pool serves by name (its load, learned speed, error rate and, under
// the igw policy, the prefix digest), behind the token file.
func (g *Gateway) newSummary() error {
	o := g.opts
	tokens, err := globalsummary.NewTokenFile(o.GlobalSummaryTokenFile, g.log)
	if err != nil {
		return err
	}
	for _, p := range g.pools {
		p.ends = globalsummary.NewErrorWindow(globalsummary.DefaultErrorWindow, 30)
	}
	exp := globalsummary.NewExporter(globalsummary.ExporterOptions{Cluster: o.Cluster, Region: o.Region}, g.summarySources)
	h, err := globalsummary.NewHandler(exp.Summary, globalsummary.HandlerOptions{Auth: tokens, Now: g.clock.Now, Log: g.log})
	if err != nil {
		return err
	}
	g.summary, g.summaryTokens = h, tokens
	return nil
}

func (g *Gateway) summarySources() []globalsummary.Source {
	var out []globalsummary.Source
	for _, p := range g.pools {
		src := globalsummary.Source{Store: p.store, Staleness: g.opts.MetricsStaleness, Errors: p.ends}
		if e, ok := p.picker.(*eppPicker); ok {
			src.Index, src.BlockTokens = e.d.Index(), e.d.BlockTokens()
		}
		for _, m := range p.cfg.Models {
			src.Model = m
			out = append(out, src)
		}
	}
	return out
}

// runSummaryTokens re-reads the token file until ctx ends (a rotated Secret).
func (g *Gateway) runSummaryTokens(ctx context.Context) error {
	g.summaryTokens.Run(ctx)
	return nil
}
