package devstack

import (
	"os"
	"strconv"
	"strings"
)

// ProcessCPUSeconds is the user and system CPU time of process pid so far, from
// /proc/PID/stat (clock ticks of 1/100 s, Linux's USER_HZ); 0 when it cannot be read. The load
// tools (loadgen -pid, e2eload -external -pid) report make run's CPU with it.
func ProcessCPUSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count the fields after its closing ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (utime + stime) / 100
}
