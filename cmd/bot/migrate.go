package main

import (
	"context"
	"fmt"
	"io"
)

// cmdMigrate applies migrations (opening a store applies them) and reports.
func cmdMigrate(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErr("migrate takes no arguments")
	}
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(stdout, "migrations applied: %s\n", st.Desc)
	return nil
}
