package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// merge writes into dir the records of several runs (results directories),
// each record marked with the run it came from, and renders their report and
// plots: the repository's one baseline holds the mixes and scales that take
// a run each. A mix at a scale must come from one run, so that every table's
// ratios compare proxiers measured side by side. A baseline merged before
// (its records already name their runs) may come first: a later run that
// measured one of its parts again replaces that part, so a session can
// refresh the committed baseline a run at a time.
func merge(dir string, runs []string) error {
	if len(runs) == 0 {
		return fmt.Errorf("-merge needs the results directories of the runs to merge")
	}
	type part struct {
		mix string
		n   int
	}
	type source struct {
		name   string
		merged bool
	}
	from := map[part]source{}
	var all []record
	for _, run := range runs {
		resolved, err := filepath.EvalSymlinks(run)
		if err != nil {
			return err
		}
		name := filepath.Base(resolved)
		data, err := os.ReadFile(filepath.Join(resolved, "results.json"))
		if err != nil {
			return err
		}
		var records []record
		if err := json.Unmarshal(data, &records); err != nil {
			return fmt.Errorf("%s: %w", run, err)
		}
		if len(records) == 0 {
			return fmt.Errorf("%s: no records", run)
		}
		this := source{name: name, merged: records[0].Run != ""}
		seen := map[part]bool{}
		for _, r := range records {
			p := part{r.Mix, r.Services}
			if other, ok := from[p]; ok && !seen[p] {
				switch {
				case other.name == name:
					return fmt.Errorf("run %s given twice", name)
				case !other.merged || this.merged:
					return fmt.Errorf("%s at %d Services is in both %s and %s: merge one of them", mixTitle(r.Mix), r.Services, other.name, name)
				}
				kept := all[:0]
				for _, old := range all {
					if (part{old.Mix, old.Services}) != p {
						kept = append(kept, old)
					}
				}
				all = kept
			}
			from[p], seen[p] = this, true
			if r.Run == "" { // a baseline merged before keeps its runs
				r.Run = name
			}
			all = append(all, r)
		}
	}
	// The report lists scales in order within a mix; keep each run's order
	// of proxiers and scenarios.
	sort.SliceStable(all, func(i, j int) bool { return all[i].Services < all[j].Services })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeResults(dir, all)
}
