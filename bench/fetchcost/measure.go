package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/proctree"
)

// usage is what one measured command, with every process it waited for, used.
type usage struct {
	Wall time.Duration
	CPU  time.Duration // user + system, the command and its reaped descendants
	// MaxRSS is ru_maxrss: the peak resident set of the largest single process of the
	// command (Linux reports the maximum over descendants, not a sum). Measured
	// through the launcher only; 0 otherwise.
	MaxRSS int64
	// TreeRSS is the peak of the summed resident sets of the command's live process
	// tree, sampled every proctree.SampleEvery; 0 when not sampled. For a pipeline (git clone
	// runs remote-http, fetch-pack and index-pack at once) it is what the machine
	// really had to hold.
	TreeRSS int64
}

// proc is a command to measure.
type proc struct {
	args   []string // program and arguments
	dir    string
	env    []string  // nil: this process's environment
	stdout io.Writer // nil: discarded
}

// meter measures commands through the launcher (see launcher/main.go).
type meter struct {
	launcher string
}

// launcherPkg is built into the work directory when the benchmark starts.
const launcherPkg = "github.com/mirrorfleet/mirrorfleet/bench/fetchcost/launcher"

// buildLauncher compiles the launcher into dir with the go command.
func buildLauncher(ctx context.Context, dir string) (meter, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(dir, "launcher")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, launcherPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return meter{}, fmt.Errorf("build the launcher: %w: %s", err, b)
	}
	return meter{launcher: out}, nil
}

// measure runs p to completion through the launcher and reports its usage; with
// sample, it also samples the RSS of p's process tree. A failed command's error
// carries what it wrote to stderr.
func (m meter) measure(ctx context.Context, p proc, sample bool) (usage, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return usage{}, fmt.Errorf("report pipe: %w", err)
	}
	defer r.Close()
	cmd := command(ctx, p, append([]string{m.launcher}, p.args...))
	cmd.ExtraFiles = []*os.File{w}
	var u usage
	var peak int64
	err = startWait(cmd, func(pid int, stop <-chan struct{}) {
		if sample {
			peak = proctree.SampleTree(pid, stop)
		}
	})
	w.Close()
	report, _ := io.ReadAll(r)
	if err != nil {
		return u, err
	}
	var kb, cpuUS, wallUS int64
	if _, err := fmt.Sscan(string(report), &kb, &cpuUS, &wallUS); err != nil {
		return u, fmt.Errorf("launcher report %q: %w", report, err)
	}
	u = usage{Wall: time.Duration(wallUS) * time.Microsecond, CPU: time.Duration(cpuUS) * time.Microsecond, MaxRSS: kb * 1024}
	u.TreeRSS = max(peak, u.MaxRSS) // a short-lived peak between two samples
	return u, nil
}

// measureDirect runs p as a direct child, for the poll loops: the launcher's own
// start would weigh on a poll's wall time. It reports wall and CPU time only (the
// RSS is the parent's, see the launcher).
func measureDirect(ctx context.Context, p proc) (usage, error) {
	cmd := command(ctx, p, p.args)
	start := time.Now()
	if err := startWait(cmd, nil); err != nil {
		return usage{}, err
	}
	u := usage{Wall: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u, nil
}

// command builds p's command in a process group of its own, killed whole when ctx
// ends (the launcher's child too).
func command(ctx context.Context, p proc, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout = p.dir, p.env, p.stdout
	cmd.Stderr = &strings.Builder{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// startWait starts cmd, calls during (if any) with its pid and a channel closed when cmd
// has exited, and waits for both.
func startWait(cmd *exec.Cmd, during func(pid int, stop <-chan struct{})) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during(cmd.Process.Pid, stop)
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-done
	if err != nil {
		msg := strings.TrimSpace(cmd.Stderr.(*strings.Builder).String())
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, msg)
	}
	return nil
}

// diskUsage walks dir: allocated is what the files and directories take on disk
// (st_blocks, as du counts), apparent the sum of the regular files' sizes.
func diskUsage(dir string) (allocated, apparent int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		if fi.Mode().IsRegular() {
			apparent += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return allocated, apparent, nil
}
