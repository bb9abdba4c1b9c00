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
	first := fs.Int("first-seed", 1, "first seed: searches seeds S..S+N-1 (a held-out set besides the grid's 1..N)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *first < 1 {
		return usageErrorf("--first-seed must be at least 1")
	}
	if err := sf.check("capacity"); err != nil {
		return err
	}
	sc, b, names, err := c.loadScenario(fs, *sf.file, stderr)
	if err != nil {
		return err
	}
	rep, err := capacity.Run(ctx, b, sc, capacity.Options{Policies: names, Seeds: c.seeds, FirstSeed: *first, Parallel: c.parallel,
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
	return rep.WriteTable(stdout, fmt.Sprintf("%s: capacity under SLO (TTFT P99 ≤ %v, TPOT P99 ≤ %v; %s, median of seeds %d..%d)",
		sc.Name, sc.SLO.TTFT, sc.SLO.TPOT, b.Mode(), *first, *first+c.seeds-1), names)
}
