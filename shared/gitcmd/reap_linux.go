package gitcmd

import (
	"errors"

	"golang.org/x/sys/unix"
)

// waitExited blocks until the process pid has exited, leaving it to be reaped
// (WNOWAIT): its pid stays taken meanwhile.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}
