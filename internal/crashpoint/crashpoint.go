// Package crashpoint lets an end-to-end test kill a process at an exact
// point of its work, as kill -9 would, without racing it from outside: the
// process is told a point by name (an environment variable or a flag) and
// sends itself SIGKILL the n-th time it reaches that point, so no deferred
// function, shutdown hook or buffered write runs after it.
//
// The examples use it only under test: a process started without a point
// never crashes.
package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Point is one armed crash point; a nil *Point is disarmed.
type Point struct {
	name string
	nth  int64
	seen atomic.Int64
}

// Parse reads "NAME" (crash the first time NAME is reached) or "NAME:N"
// (the N-th time). An empty spec returns nil, which never crashes. valid
// lists the names the process knows; another name is an error, so that a
// test cannot arm a point that is never reached.
func Parse(spec string, valid ...string) (*Point, error) {
	if spec == "" {
		return nil, nil
	}
	name, nth := spec, int64(1)
	if i := strings.LastIndexByte(spec, ':'); i >= 0 {
		n, err := strconv.ParseInt(spec[i+1:], 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("crash point %q: the count after ':' must be a positive integer", spec)
		}
		name, nth = spec[:i], n
	}
	for _, v := range valid {
		if name == v {
			return &Point{name: name, nth: nth}, nil
		}
	}
	return nil, fmt.Errorf("crash point %q: unknown point (known: %s)", name, strings.Join(valid, ", "))
}

// String is the spec the point was parsed from.
func (p *Point) String() string {
	if p == nil {
		return ""
	}
	return p.name + ":" + strconv.FormatInt(p.nth, 10)
}

// Reached counts one passage through the point name and, on the n-th,
// writes one line to stderr (with detail, such as the id of the message in
// hand, when given) and kills the process with SIGKILL. It never returns
// then. Calls for other names, and on a nil Point, do nothing.
func (p *Point) Reached(name string, detail ...string) {
	if p == nil || name != p.name || p.seen.Add(1) != p.nth {
		return
	}
	line := fmt.Sprintf("crashpoint: SIGKILL at %s (passage %d)", p.name, p.nth)
	if len(detail) > 0 {
		line += ": " + strings.Join(detail, " ")
	}
	fmt.Fprintln(os.Stderr, line)
	self, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = self.Kill() // SIGKILL on Unix
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashpoint: cannot kill the process: %v\n", err)
		os.Exit(137)
	}
	select {} // the signal is asynchronous: nothing more may run
}
