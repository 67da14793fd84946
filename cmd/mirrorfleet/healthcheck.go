package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// runHealthcheck is a container health check that needs no shell in the image: exit 0
// when the process it checks is healthy, 1 with the reason otherwise. A worker is
// healthy when its alive file (MIRRORFLEET_ALIVE_FILE, touched after each heartbeat
// the store accepted) is recent; a server when its health URL answers 200.
func runHealthcheck(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "alive file whose modification time must be recent")
	maxAge := fs.Duration("max-age", 2*time.Minute, "with --file: the oldest modification time that is healthy")
	url := fs.String("url", "", "URL that must answer 200 (e.g. http://127.0.0.1:8080/healthz)")
	timeout := fs.Duration("timeout", 5*time.Second, "with --url: how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*file == "") == (*url == "") {
		return usageError{"healthcheck takes exactly one of --file or --url"}
	}
	if *file != "" {
		fi, err := os.Stat(*file)
		if err != nil {
			return fmt.Errorf("unhealthy: %w", err)
		}
		if age := time.Since(fi.ModTime()); age > *maxAge {
			return fmt.Errorf("unhealthy: %s last touched %s ago (more than %s)", *file, age.Round(time.Second), *maxAge)
		}
		fmt.Fprintln(stdout, "healthy")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return usageError{fmt.Sprintf("--url: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return errors.New("unhealthy: " + *url + " answered " + resp.Status)
	}
	fmt.Fprintln(stdout, "healthy")
	return nil
}
