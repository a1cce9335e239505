//go:build unix

package generator

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system, every thread) this process
// has used: on a shared machine it varies far less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
