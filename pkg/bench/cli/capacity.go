package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/capacity"
)

func runCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := commonFlags("capacity", stderr, "")
	sf := registerScenarioFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := sf.check("capacity"); err != nil {
		return err
	}
	sc, b, names, err := c.loadScenario(fs, *sf.file, stderr)
	if err != nil {
		return err
	}
	rep, err := capacity.Run(ctx, b, sc, capacity.Options{Policies: names, Seeds: c.seedRange(), Parallel: c.parallel,
		Progress: bench.NewProgress(stderr, sc.Name+" capacity", len(names)*c.seeds)})
	if err != nil {
		return err
	}
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
		if err := bench.WriteJSON(filepath.Join(c.out, "capacity-"+sc.Name+".json"), rep); err != nil {
			return err
		}
	}
	if *sf.format == "json" {
		return printJSON(stdout, rep)
	}
	return rep.WriteTable(stdout, fmt.Sprintf("%s: capacity under SLO (TTFT P99 ≤ %v, TPOT P99 ≤ %v; %s, median of seeds %v)",
		sc.Name, sc.SLO.TTFT, sc.SLO.TPOT, b.Mode(), c.seedRange()), names)
}
