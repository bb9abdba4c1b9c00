package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/capacity"
)

func runCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := commonFlags("capacity", stderr, "")
	file := fs.String("scenario", "", "scenario file (required)")
	format := fs.String("format", "table", "json or table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("capacity: --scenario FILE is required")
	}
	if *format != "json" && *format != "table" {
		return fmt.Errorf("--format must be json or table, got %q", *format)
	}
	sc, err := loadShortened(*file, c.duration)
	if err != nil {
		return err
	}
	b, names, err := c.resolve(stderr)
	if err != nil {
		return err
	}
	rep, err := capacity.Run(ctx, b, sc, capacity.Options{Policies: names, Seeds: c.seeds, Parallel: c.parallel,
		Progress: bench.NewProgress(stderr, sc.Name+" capacity", len(names)*c.seeds)})
	if err != nil {
		return err
	}
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.out, "capacity-"+sc.Name+".json"), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(stdout, fmt.Sprintf("%s: capacity under SLO (TTFT P99 ≤ %v, TPOT P99 ≤ %v; %s, median of seeds 1..%d)",
		sc.Name, sc.SLO.TTFT, sc.SLO.TPOT, b.Mode(), c.seeds), names)
}
