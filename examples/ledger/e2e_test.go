package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemgen/idemgen/internal/stores/harness"
	"github.com/idemgen/idemgen/internal/testutil"
)

// TestPipelineJetStream and TestPipelineRabbitMQ run the whole example:
// the payments server writing events into its outbox, the relay
// publishing them, and the ledger consumer applying them, under a load of
// charges and refunds retried by their clients, while each process is
// killed (SIGKILL) at its worst moment and restarted, and the broker
// connections are cut:
//
//  1. the server after a commit, before the relay publishes (the relay is
//     not running yet): the client hears nothing and retries; the retry is
//     a replay, the event is in the outbox once;
//  2. the relay after publishing an event, before marking it sent: the
//     restarted relay publishes it again, with the same id;
//  3. the consumer after its ledger write committed, before its ack: the
//     broker delivers the event again;
//  4. the relay's and the consumer's broker connections, cut for two
//     seconds; then each process is killed once more at an arbitrary
//     moment.
//
// At the end the ledger has exactly one entry per charge and per refund:
// none twice, none lost, and every balance is what the payments database
// says.
func TestPipelineJetStream(t *testing.T) { pipeline(t, "nats", brokerURL(t, "IDEMGEN_TEST_NATS")) }

func TestPipelineRabbitMQ(t *testing.T) { pipeline(t, "amqp", brokerURL(t, "IDEMGEN_TEST_AMQP")) }

func brokerURL(t *testing.T, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s not set", env)
	}
	return v
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freshDatabase creates a database for the test and drops it at the end.
func freshDatabase(t testing.TB, base, prefix string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	name := prefix + randHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// viaProxy returns rawURL with its host replaced by the proxy's.
func viaProxy(t *testing.T, rawURL string, p *harness.Proxy) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// duplicateLine is in the consumer's log line for each duplicate.
const duplicateLine = `msg="duplicate delivery acked without applying"`

var (
	paymentsReady = regexp.MustCompile(`msg="payments listening"`)
	relayReady    = regexp.MustCompile(`msg=relaying `)
	consumerReady = regexp.MustCompile(`msg=consuming `)
)

func pipeline(t *testing.T, broker, rawURL string) {
	pgBase := testutil.PostgresDSN(t)
	t.Parallel()
	paymentsBin, ledgerBin := binaries(t)
	run := "e2e" + randHex(4)
	payDB := freshDatabase(t, pgBase, "ledger_e2e_payments_")
	ledgerDB := freshDatabase(t, pgBase, "ledger_e2e_ledger_")

	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	relayProxy, consumerProxy := harness.NewProxy(t, u.Host), harness.NewProxy(t, u.Host)
	names := []string{"-broker", broker, "-subject-prefix", run + ".payments.",
		"-stream", "LEDGER_" + run, "-exchange", "ledger-" + run, "-queue", "ledger-" + run}
	t.Cleanup(func() { dropBrokerNames(t, broker, rawURL, run) })

	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	pay := newRole(t, "payments", paymentsBin, paymentsReady, "-addr", addr, "-dsn", payDB)
	relay := newRole(t, "relay", ledgerBin, relayReady, append([]string{"relay", "-dsn", payDB,
		"-url", viaProxy(t, rawURL, relayProxy), "-lease", "3s", "-poll", "50ms"}, names...)...)
	consumer := newRole(t, "consumer", ledgerBin, consumerReady, append([]string{"consume", "-dsn", ledgerDB,
		"-url", viaProxy(t, rawURL, consumerProxy), "-ack-wait", "2s"}, names...)...)

	consumer.start("LEDGER_CRASH_AT=after-commit:40")
	pay.start("PAYMENTS_CRASH_AT=after-commit:15")
	l := &load{base: "http://" + addr, run: run, pause: 20 * time.Millisecond,
		accounts: []string{"acct_" + run + "_a", "acct_" + run + "_b", "acct_" + run + "_c"}}
	l.start(4)

	// 1. The server dies after its 15th commit; nothing has been published
	// yet. Its clients retry against the restarted server.
	pay.waitCrash(30 * time.Second)
	pay.start()

	// 2. The relay dies after its 25th publish, before marking it sent.
	relay.start("LEDGER_CRASH_AT=after-publish:25")
	relay.waitCrash(30 * time.Second)
	relay.start()

	// 3. The consumer dies after its 40th commit, before the ack.
	consumer.waitCrash(30 * time.Second)
	consumer.start()

	// 4. The broker connections go away for two seconds, then each
	// process is killed once at an arbitrary moment.
	time.Sleep(time.Second)
	relayProxy.Cut()
	consumerProxy.Cut()
	time.Sleep(2 * time.Second)
	relayProxy.Restore()
	consumerProxy.Restore()
	time.Sleep(time.Second)
	for _, r := range []*role{relay, consumer, pay} {
		r.kill()
		r.start()
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second)

	charges, refunds, errs := l.finish()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%s: %d charges and %d refunds created (%d retries, %d replays)", broker, charges, refunds, l.retries.Load(), l.replays.Load())

	want := expectedEntries(t, payDB)
	if len(want) != charges+refunds {
		t.Fatalf("the payments database has %d charges and refunds, the clients created %d: a retry ran twice or a write was lost", len(want), charges+refunds)
	}
	got := waitLedger(t, ledgerDB, len(want), 60*time.Second)
	checkLedger(t, want, got)
	checkBalances(t, payDB, ledgerDB)
	if n := unsentEvents(t, payDB); n != 0 {
		t.Errorf("%d outbox events are not marked sent", n)
	}

	// Each crash happened once, and deduplication had work to do.
	for _, r := range []*role{pay, relay, consumer} {
		if n := r.count("crashpoint: SIGKILL at "); n != 1 {
			t.Errorf("%s reached its crash point %d times, want 1", r.name, n)
		}
	}
	dups := consumer.count(duplicateLine)
	// The event the consumer had committed when it died came again, and
	// was acknowledged without being applied.
	if id := crashDetail(t, consumer, "message"); consumer.count(duplicateLine, "message_id="+id+" ") == 0 {
		t.Errorf("the consumer died after committing %s, but no redelivery of it was dropped as a duplicate", id)
	}
	published := crashDetail(t, relay, "event")
	switch broker {
	case "nats":
		// JetStream dropped the relay's re-publish: the stream holds each
		// event once.
		if n := streamMessages(t, rawURL, "LEDGER_"+run); n != uint64(len(want)) {
			t.Errorf("the stream holds %d messages for %d events: a re-publish was not dropped", n, len(want))
		}
	case "amqp":
		// RabbitMQ delivered the relay's re-publish; the consumer dropped it.
		if consumer.count(duplicateLine, "message_id="+published+" ") == 0 {
			t.Errorf("the relay died after publishing %s, but the consumer dropped no second copy of it", published)
		}
	}
	t.Logf("%s: %d ledger entries, %d duplicate deliveries dropped by the consumer", broker, len(got), dups)
}

// crashDetail returns what r's crashpoint line names after the word what
// ("message ID", "event ID"): the message in hand when it died.
func crashDetail(t *testing.T, r *role, what string) string {
	t.Helper()
	m := regexp.MustCompile(`crashpoint: SIGKILL at \S+ \(passage \d+\): ` + what + ` (\S+)`).FindStringSubmatch(r.log())
	if m == nil {
		t.Fatalf("%s's crashpoint line names no %s", r.name, what)
	}
	return m[1]
}

// entryKey is one expected ledger entry.
type entryKey struct {
	eventID string
	amount  int64
}

// expectedEntries reads the events the payments database committed: one
// per charge (its amount) and one per refund (minus its amount).
func expectedEntries(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	want := map[string]int64{}
	rows, err := conn.Query(ctx, `SELECT 'charge.created:' || id, amount FROM charges
		UNION ALL SELECT 'refund.created:' || id, -amount FROM refunds`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var amount int64
		if err := rows.Scan(&id, &amount); err != nil {
			t.Fatal(err)
		}
		want[id] = amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// waitLedger waits until the ledger has at least n entries (or the time is
// up) and returns every entry's event id and amount, duplicates included.
func waitLedger(t *testing.T, dsn string, n int, within time.Duration) []entryKey {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(within)
	for {
		var have int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM ledger_entries`).Scan(&have); err != nil {
			t.Fatal(err)
		}
		if have >= n || time.Now().After(deadline) {
			if have < n {
				t.Errorf("the ledger has %d entries after %v, want %d", have, within, n)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything applied twice shows up now
	rows, err := conn.Query(ctx, `SELECT event_id, amount FROM ledger_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []entryKey
	for rows.Next() {
		var e entryKey
		if err := rows.Scan(&e.eventID, &e.amount); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkLedger: every event once, with its amount; none twice, none lost,
// none made up.
func checkLedger(t *testing.T, want map[string]int64, got []entryKey) {
	t.Helper()
	seen := map[string]int{}
	for _, e := range got {
		seen[e.eventID]++
		amount, ok := want[e.eventID]
		switch {
		case !ok:
			t.Errorf("ledger entry for %s, which the payments database does not have", e.eventID)
		case seen[e.eventID] == 2:
			t.Errorf("event %s applied twice", e.eventID)
		case amount != e.amount:
			t.Errorf("event %s applied with amount %d, want %d", e.eventID, e.amount, amount)
		}
	}
	lost := 0
	for id := range want {
		if seen[id] == 0 {
			if lost++; lost <= 10 {
				t.Errorf("event %s never reached the ledger", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d events lost", lost, len(want))
	}
}

// checkBalances compares each account's ledger balance with its charges
// minus its refunds in the payments database.
func checkBalances(t *testing.T, payDB, ledgerDB string) {
	t.Helper()
	want := sums(t, payDB, `SELECT account, sum(amount) FROM (SELECT account, amount FROM charges
		UNION ALL SELECT account, -amount FROM refunds) x GROUP BY account`)
	got := sums(t, ledgerDB, `SELECT account, sum(balance) FROM ledger_balances GROUP BY account`)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("balances: ledger %v, payments %v", got, want)
	}
}

func sums(t *testing.T, dsn, q string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var acct string
		var n int64
		if err := rows.Scan(&acct, &n); err != nil {
			t.Fatal(err)
		}
		out[acct] = n
	}
	return out
}

func unsentEvents(t *testing.T, dsn string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys_outbox WHERE sent_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func streamMessages(t *testing.T, rawURL, stream string) uint64 {
	t.Helper()
	nc, err := nats.Connect(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// dropBrokerNames deletes the run's stream, or its exchange and queues.
func dropBrokerNames(t testing.TB, broker, rawURL, run string) {
	switch broker {
	case "nats":
		nc, err := nats.Connect(rawURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			err = js.DeleteStream(context.Background(), "LEDGER_"+run)
		}
		if err != nil {
			t.Errorf("cleanup: delete stream: %v", err)
		}
	case "amqp":
		conn, err := amqp.Dial(rawURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer ch.Close()
		q := "ledger-" + run
		for _, name := range []string{q, q + ".dead", q + ".retry.1s", q + ".retry.10s", q + ".retry.1m0s"} {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				t.Errorf("cleanup: delete queue %s: %v", name, err)
				return
			}
		}
		if err := ch.ExchangeDelete("ledger-"+run, false, false); err != nil {
			t.Errorf("cleanup: delete exchange: %v", err)
		}
	}
}
