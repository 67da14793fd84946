//go:build !linux

package gitcmd

// waitExited cannot wait without reaping here: what git leaves in its group is killed
// only with its context.
func waitExited(int) bool { return false }
