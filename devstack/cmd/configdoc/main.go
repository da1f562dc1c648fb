// Command configdoc generates the settings table of docs/configuration.md#run-time-settings
// from the settings structs (devstack.SettingsTable). Run it from the repository root:
//
//	go run ./devstack/cmd/configdoc       # prints the table
//	go run ./devstack/cmd/configdoc -w    # rewrites it in docs/configuration.md
//
// devstack's TestConfigDocUpToDate fails while the file differs from what -w would write.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/devstack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run() error {
	write := flag.Bool("w", false, "rewrite the table in the document instead of printing it")
	path := flag.String("f", devstack.ConfigDocPath, "the document holding the table")
	flag.Parse()
	table, err := devstack.SettingsTable()
	if err != nil {
		return err
	}
	if !*write {
		fmt.Println(table)
		return nil
	}
	doc, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	out, err := devstack.ReplaceSettingsTable(string(doc), table)
	if err != nil {
		return err
	}
	return os.WriteFile(*path, []byte(out), 0o644)
}
