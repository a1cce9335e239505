package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// target is one of issue 25's targets: ratio of dialect at least want (0:
// reported only), also stated against its floor, the first of floors the
// run measured: the fewest round trips a design can make with no wrapper,
// over the same denominator, and each of also the run measured (a row
// each). Reaching 90% of the floor's ratio counts as reaching the target.
type target struct {
	dialect, num, den string
	want              float64
	floors, also      []string
}

var (
	txFloors     = []string{"floor-tx-batched", "floor-tx", "store-tx"}
	nontxFloors  = []string{"floor-nontx", "store-nontx"}
	replayFloors = []string{"post-get"}
	// floor-replay is the replay's floor in work: what any design must do
	// to answer a retry (the body's digest compared, the saved status,
	// Content-Type and body read with their expiry), where post-get is its
	// floor in round trips alone.
	replayWork = []string{"floor-replay"}
	targets    = []target{
		{"postgres", "newkey-tx", "insert", 0.40, txFloors, nil},
		{"postgres", "newkey", "insert", 0.33, nontxFloors, nil},
		{"postgres", "replay", "get", 0.90, replayFloors, replayWork},
		{"sqlite", "newkey-tx", "insert", 0.55, txFloors, nil},
		{"sqlite", "newkey", "insert", 0, nontxFloors, nil},
		{"sqlite", "replay", "get", 0.90, replayFloors, replayWork},
		{"mysql", "newkey-tx", "insert", 0, txFloors, nil},
		{"mysql", "newkey", "insert", 0, nontxFloors, nil},
		{"mysql", "replay", "get", 0, replayFloors, replayWork},
	}
)

// ratio is num/den of one dialect, per round, or nil when either side did
// not run.
func (r *result) ratio(dialect, num, den string) []float64 {
	n, d := r.rps[dialect][num], r.rps[dialect][den]
	if len(n) == 0 || len(n) != len(d) {
		return nil
	}
	out := make([]float64, len(n))
	for i := range n {
		out[i] = n[i] / d[i]
	}
	return out
}

// median of xs (the lower middle one of an even count, as interleave's).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func spread(xs []float64, format string) string {
	if len(xs) == 1 {
		return fmt.Sprintf(format, xs[0])
	}
	return fmt.Sprintf(format+" ("+format+"-"+format+")", median(xs), slices.Min(xs), slices.Max(xs))
}

func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// report prints the result as markdown: requests/s per round, each ratio's
// median and range over the rounds, and the targets with their floors.
func report(cfg config, r *result) {
	w := cfg.out
	var version string
	if out, err := exec.Command(cfg.wrk, "--version").CombinedOutput(); err == nil || len(out) > 0 {
		version, _, _ = strings.Cut(string(out), " Copyright")
	}
	fmt.Fprintf(w, "## loadbench %s, commit %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), commit())
	fmt.Fprintf(w, "%s, %d connections, %d threads; after a warm-up of %s per case, %d rounds of %s per case, the cases\n",
		strings.TrimSpace(version), cfg.connections, cfg.threads, cfg.warmup, cfg.rounds, cfg.duration)
	fmt.Fprintf(w, "in turn within each round, ")
	fmt.Fprintf(w, "one server process per dialect; load average (1, 5, 15 min) %s before the rounds, %s after.\n\n", r.load[0], r.load[1])

	fmt.Fprintf(w, "| dialect | case | requests/s, each round | median |\n|---|---|---|---:|\n")
	for _, s := range r.servers {
		for _, c := range s.info.Cases {
			xs := r.rps[s.dialect][c.Name]
			if len(xs) == 0 {
				continue
			}
			rounds := make([]string, len(xs))
			for i, x := range xs {
				rounds[i] = fmt.Sprintf("%.0f", x)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f |\n", s.dialect, c.Name, strings.Join(rounds, ", "), median(xs))
		}
	}

	fmt.Fprintf(w, "\nRatios, median of the rounds (range):\n\n| ratio |")
	for _, s := range r.servers {
		fmt.Fprintf(w, " %s |", s.dialect)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(r.servers)))
	var names [][2]string
	for _, s := range r.servers {
		for _, ra := range s.info.Ratios {
			if !slices.Contains(names, ra) {
				names = append(names, ra)
			}
		}
	}
	for _, ra := range names {
		row := fmt.Sprintf("| %s/%s |", ra[0], ra[1])
		any := false
		for _, s := range r.servers {
			if xs := r.ratio(s.dialect, ra[0], ra[1]); xs != nil {
				row += " " + spread(xs, "%.2f") + " |"
				any = true
			} else {
				row += " |"
			}
		}
		if any {
			fmt.Fprintln(w, row)
		}
	}

	fmt.Fprintf(w, "\nTargets (issue 25), each against its floor: the fewest round trips with no wrapper, same run;\n")
	fmt.Fprintf(w, "90%% of the floor's ratio counts as reaching the target.\n\n")
	fmt.Fprintf(w, "| dialect | ratio | measured | target | floor | floor's ratio | 90%% of it | |\n|---|---|---:|---:|---|---:|---:|---|\n")
	for _, t := range targets {
		xs := r.ratio(t.dialect, t.num, t.den)
		if xs == nil {
			continue
		}
		floors := []string{""} // none measured
		for _, f := range t.floors {
			if r.ratio(t.dialect, f, t.den) != nil {
				floors[0] = f
				break
			}
		}
		for _, f := range t.also {
			if r.ratio(t.dialect, f, t.den) != nil {
				floors = append(floors, f)
			}
		}
		for _, f := range floors {
			fmt.Fprintln(w, r.targetRow(t, xs, f))
		}
	}
}

// targetRow is the row of t, measured xs, against the floor f ("": none
// measured).
func (r *result) targetRow(t target, xs []float64, f string) string {
	m := median(xs)
	floorName, floorCell, ninety := "none measured", "", ""
	var fm float64
	if f != "" {
		fs := r.ratio(t.dialect, f, t.den)
		fm = median(fs)
		floorName, floorCell, ninety = f, spread(fs, "%.2f"), fmt.Sprintf("%.2f", 0.9*fm)
	}
	want, verdict := "report", ""
	if t.want > 0 {
		want = fmt.Sprintf("%.2f", t.want)
		switch {
		case m >= t.want:
			verdict = "met"
		case fm > 0 && m >= 0.9*fm:
			verdict = "met (90% of the floor)"
		default:
			verdict = "**missed**"
		}
	}
	return fmt.Sprintf("| %s | %s/%s | %s | %s | %s | %s | %s | %s |",
		t.dialect, t.num, t.den, spread(xs, "%.2f"), want, floorName, floorCell, ninety, verdict)
}
