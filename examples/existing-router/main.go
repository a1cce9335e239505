// Command existing-router shows idemgen's runtime in an application that
// already has its own http.ServeMux and no OpenAPI spec: it protects two of
// its routes with hand-written policies and idemrt.Wrap, and leaves every
// other route alone. Records live in memory, which suits one process (a
// development server, a single-instance tool); use a generated SQL store
// when several processes serve the same keys.
//
// What it shows that examples/payments does not: per-route Wrap instead of
// the whole-router middleware, policies written by hand, a key from a query
// parameter, and `wait` (a duplicate that arrives while the first attempt
// runs waits for its result instead of getting 409).
//
//	go run ./examples/existing-router   # serves on localhost:8081
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("existing-router", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8081", "address to serve on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	store := idemrt.NewMemoryStore()
	app, err := newApp(store, log, 0)
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	go idemrt.RunSweeper(ctx, store, time.Minute, 1000)
	srv := &http.Server{Addr: *addr, Handler: app, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	log.Info("listening", "addr", *addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

// The two protected operations. Only the fields that differ from the
// contract's defaults are set (24h TTL, 60s lease, save 2xx and 4xx...).
var (
	// createTodoPolicy: POST /todos with an Idempotency-Key header, one key
	// space for everyone; a duplicate in progress waits up to 5s for the
	// first attempt's response.
	createTodoPolicy = &idemrt.Policy{
		OperationID: "createTodo",
		Method:      http.MethodPost,
		Route:       "/todos",
		Key:         idemrt.KeyFromHeader,
		KeyName:     "Idempotency-Key",
		Principal:   idemrt.PrincipalAnonymous,
		Wait:        5 * time.Second,
	}
	// sendReminderPolicy: POST /todos/{id}/remind?request_id=... for clients
	// (cron jobs, HTML forms) that cannot set headers. The path parameter
	// counts in the fingerprint, so one request_id cannot serve two todos.
	sendReminderPolicy = &idemrt.Policy{
		OperationID: "sendReminder",
		Method:      http.MethodPost,
		Route:       "/todos/{id}/remind",
		Key:         idemrt.KeyFromQuery,
		KeyName:     "request_id",
		Principal:   idemrt.PrincipalAnonymous,
	}
)

// app is the application as it was before idempotency: a ServeMux and its
// handlers, with in-memory todos.
type app struct {
	mu        sync.Mutex
	todos     []todo
	reminders int
	delay     time.Duration // for tests: make creating a todo slow
}

type todo struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
}

// newApp builds the router and wraps its two unsafe routes.
func newApp(store idemrt.Store, log *slog.Logger, delay time.Duration) (http.Handler, error) {
	a := &app{delay: delay}
	opts := idemrt.Options{Store: store, Logger: log}
	create, err := idemrt.Wrap(opts, createTodoPolicy, http.HandlerFunc(a.createTodo))
	if err != nil {
		return nil, err
	}
	remind, err := idemrt.Wrap(opts, sendReminderPolicy, http.HandlerFunc(a.sendReminder))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /todos", create)
	mux.Handle("POST /todos/{id}/remind", remind)
	mux.HandleFunc("GET /todos", a.listTodos) // safe: not wrapped
	mux.HandleFunc("GET /stats", a.stats)
	return mux, nil
}

func (a *app) createTodo(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title string `json:"title"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" {
		http.Error(w, `{"error":"want {\"title\": \"...\"}"}`, http.StatusBadRequest)
		return
	}
	time.Sleep(a.delay)
	a.mu.Lock()
	t := todo{ID: len(a.todos) + 1, Title: in.Title}
	a.todos = append(a.todos, t)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/todos/"+strconv.Itoa(t.ID))
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(t)
}

func (a *app) sendReminder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil || id < 1 || id > len(a.todos) {
		http.Error(w, `{"error":"no such todo"}`, http.StatusNotFound)
		return
	}
	a.reminders++ // stands for sending an e-mail
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"todo\":%d,\"reminder\":%d}\n", id, a.reminders)
}

func (a *app) listTodos(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(append([]todo{}, a.todos...))
}

func (a *app) stats(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"todos\":%d,\"reminders\":%d}\n", len(a.todos), a.reminders)
}
