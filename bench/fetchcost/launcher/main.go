// Command launcher runs a command and reports its resource usage on file descriptor 3,
// as "maxrss_kb cpu_us wall_us" on one line, and exits with the command's exit status.
//
// It exists for ru_maxrss: at exec, Linux folds the peak RSS of the process that
// forked (with vfork, the parent's own memory) into the new process's maxrss, so a
// command started by a big parent reports at least the parent's peak. Started by
// this small program instead, the floor is this program's RSS, about 2 MB.
package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: launcher program [argument...]\n")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	code := 0
	if err != nil {
		code = 1
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			os.Stderr.WriteString("launcher: " + err.Error() + "\n")
			os.Exit(code)
		}
		if ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu := ru.Utime.Nano() + ru.Stime.Nano()
		line := strconv.FormatInt(ru.Maxrss, 10) + " " + strconv.FormatInt(cpu/1000, 10) + " " +
			strconv.FormatInt(wall.Microseconds(), 10) + "\n"
		os.NewFile(3, "report").WriteString(line)
	}
	os.Exit(code)
}
