// Command kubectl-fleet is the kubectl plugin of fleet-controller (`kubectl fleet ...`):
// worker and operator commands, and the worker commands as MCP tools. The logic lives in
// internal/cli.
package main

import (
	"os"

	"github.com/giteatools/fleet-controller/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
