package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "engenho:", err)
		os.Exit(exitCode(err))
	}
}
