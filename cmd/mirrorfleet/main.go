// Command mirrorfleet runs the local fleet and talks to its API.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mirrorfleet run")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		fmt.Println("mirrorfleet run: not yet — the local product (API, real mirrors) is still being built; `make test` runs the fleet in simulation")
	default:
		fmt.Fprintf(os.Stderr, "mirrorfleet: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
