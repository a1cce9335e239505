// Command ledger is the consuming half of idemgen's messaging example
// (issue 22): the payments example (examples/payments) writes
// charge.created and refund.created events into its outbox table in each
// charge's and refund's transaction, and this command runs the two
// processes that carry them into a ledger:
//
//	ledger relay   -dsn PAYMENTS_DB -broker nats|amqp   # outbox -> broker (idemrt.Relay)
//	ledger consume -dsn LEDGER_DB   -broker nats|amqp   # broker -> ledger table, each event once
//
// The relay publishes each event with its outbox id as the broker's message
// id (Nats-Msg-Id, AMQP message-id) and marks it sent after the broker
// confirmed it; the consumer applies each event in one transaction with the
// record of its id (idemrt.ProcessOnce, through natsidem or amqpidem) and
// acknowledges it after the commit. README.md says how to run the pipeline
// by hand, and e2e_test.go kills every process at its worst moment.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// The ledger's key store: the processed-id table that deduplicates
// deliveries, and the outbox table the relay reads (the same generated code
// reads the payments database's outbox; see relay.go).
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -spec openapi.yaml -out internal/ledgerstore -package ledgerstore -dialect postgres

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: ledger relay|consume [flags]

  relay     publish the payments database's outbox events to the broker
  consume   apply the broker's payment events to the ledger, each once

"ledger relay -h" and "ledger consume -h" list the flags. Every flag can
also be set in the environment as LEDGER_<NAME> (LEDGER_DSN, LEDGER_BROKER);
the command line wins.
`

// run returns the process exit code: 0 after a clean shutdown, 1 on
// errors, 2 on usage.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "relay":
		return runRelay(ctx, args[1:], getenv, stderr)
	case "consume":
		return runConsume(ctx, args[1:], getenv, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ledger: unknown command %q\n\n%s", args[0], usage)
	return 2
}
