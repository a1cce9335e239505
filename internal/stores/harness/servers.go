package harness

// Private database servers for the tests that need a server in a state the
// shared test servers must not be put in: a PostgreSQL standby in recovery,
// a read-only MariaDB. Each test starts its own server in a temporary
// folder, reachable only through a Unix socket in that folder, and stops it
// and removes the folder in its cleanup. The shared servers are never
// touched.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	idemrt "github.com/idemgen/idemgen/runtime"
)

// ReplicasEnv enables the tests that start private database servers. When it
// is set, a missing server binary fails the test instead of skipping it.
const ReplicasEnv = "IDEMGEN_TEST_REPLICAS"

// RequireReplicas skips t unless ReplicasEnv is set.
func RequireReplicas(t testing.TB) {
	t.Helper()
	if os.Getenv(ReplicasEnv) == "" {
		t.Skipf("starts a private database server (initdb/pg_ctl, mariadb-install-db/mariadbd); set %s=1 to run it (.ci/run does)", ReplicasEnv)
	}
}

// serverTimeout bounds every server command (initdb, pg_ctl, install-db,
// start-up, shutdown).
const serverTimeout = 20 * time.Second

// privateDir makes a temporary folder that another OS user can traverse
// (0755; t.TempDir's are 0700 below a 0700 parent), removed at the end of t.
func privateDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}

// run runs a server command with a timeout and returns its combined output,
// or fails t with it.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// process is a server process that startProcess started.
type process struct {
	cmd  *exec.Cmd
	exit chan struct{} // closed once the process has exited
	err  error         // Wait's error, set before exit is closed
}

// startProcess starts cmd and waits, for at most serverTimeout, until ready
// reports true. The process is returned even with an error (it may still
// run: kill it); name and logPath go into the error.
func startProcess(cmd *exec.Cmd, name, logPath string, ready func() bool) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exit: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exit) }()
	deadline := time.Now().Add(serverTimeout)
	for !ready() {
		if p.exited() {
			return p, fmt.Errorf("%s exited during start-up: %v\nlog:\n%s", name, p.err, tail(logPath))
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("%s did not answer within %s\nlog:\n%s", name, serverTimeout, tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.exit:
		return true
	default:
		return false
	}
}

// kill kills the process (SIGKILL) and waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exit
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// Postgres is a private PostgreSQL cluster, listening only on a Unix socket
// in its folder, with trust authentication for the user postgres.
type Postgres struct {
	bin  string // the folder of initdb and pg_ctl
	data string // PGDATA
	sock string // the socket folder
	log  string
	as   string // the OS user that runs the server ("" for the current one)
}

// postgresBin finds the folder of initdb and pg_ctl: IDEMGEN_TEST_PG_BIN,
// else the newest /usr/lib/postgresql/<version>/bin, else pg_ctl's folder on
// PATH.
func postgresBin(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("IDEMGEN_TEST_PG_BIN"); dir != "" {
		return dir
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) > 0 {
		version := func(d string) int { v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return v }
		sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
		return found[len(found)-1]
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatalf("%s is set but no PostgreSQL server binaries were found (initdb, pg_ctl in /usr/lib/postgresql/*/bin or on PATH; or set IDEMGEN_TEST_PG_BIN)", ReplicasEnv)
	return ""
}

// StartPostgres creates a cluster (initdb) and starts it as a primary. It is
// stopped (immediate mode) and removed at the end of t. PostgreSQL refuses to
// run as root, so under root the server runs as the OS user postgres.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	s := &Postgres{bin: postgresBin(t)}
	for _, name := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(s.bin, name)); err != nil {
			t.Fatalf("%s is set but %v", ReplicasEnv, err)
		}
	}
	dir := privateDir(t, "idemgen-pg-")
	s.data, s.sock = filepath.Join(dir, "data"), filepath.Join(dir, "run")
	s.log = filepath.Join(s.sock, "postgres.log")
	for _, d := range []string{s.data, s.sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs another OS user: %v", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Fatalf("running as root, PostgreSQL is started through runuser: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{s.data, s.sock} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		s.as = "postgres"
	}
	s.pg(t, "initdb", "-D", s.data, "-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C")
	// Small and socket-only. These settings go into postgresql.conf, so the
	// primary and the standby it becomes run with the same ones (a standby
	// refuses to start with, e.g., fewer max_connections than its primary).
	conf := fmt.Sprintf("\nlisten_addresses = ''\nport = 5432\nunix_socket_directories = '%s'\nshared_buffers = 16MB\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n", s.sock)
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Registered before the start, so that a start that times out with the
	// postmaster running still stops it before its folder is removed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
		defer cancel()
		argv := s.cmd("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			// Already stopped (the test stopped it) is fine; anything else is a leak.
			if _, statErr := os.Stat(filepath.Join(s.data, "postmaster.pid")); statErr == nil {
				t.Errorf("pg_ctl stop: %v\n%s", err, out)
			}
		}
	})
	s.start(t)
	return s
}

// cmd is the command line of the server program name, run as s.as.
func (s *Postgres) cmd(name string, args ...string) []string {
	argv := append([]string{filepath.Join(s.bin, name)}, args...)
	if s.as != "" {
		argv = append([]string{"runuser", "-u", s.as, "--"}, argv...)
	}
	return argv
}

func (s *Postgres) pg(t testing.TB, name string, args ...string) string {
	t.Helper()
	argv := s.cmd(name, args...)
	return run(t, argv[0], argv[1:]...)
}

func (s *Postgres) start(t testing.TB) {
	t.Helper()
	argv := s.cmd("pg_ctl", "-D", s.data, "-l", s.log, "-w", "-t", "20", "start")
	ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s\nserver log:\n%s", err, out, tail(s.log))
	}
}

// DSN is a pgx connection string for the database postgres as the user
// postgres.
func (s *Postgres) DSN() string {
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", s.sock)
}

// RestartAsStandby stops the server cleanly and starts it again as a standby
// (standby.signal, no primary_conninfo or restore_command): it replays
// nothing, reaches consistency at its shutdown checkpoint and, hot_standby
// being on by default, accepts read-only sessions in which
// pg_is_in_recovery() is true. It holds the same data as the primary had.
func (s *Postgres) RestartAsStandby(t testing.TB) {
	t.Helper()
	s.pg(t, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "20", "stop")
	if err := os.WriteFile(filepath.Join(s.data, "standby.signal"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
}

// Promote ends recovery (pg_ctl promote, waiting until it is done).
func (s *Postgres) Promote(t testing.TB) {
	t.Helper()
	s.pg(t, "pg_ctl", "-D", s.data, "-w", "-t", "20", "promote")
}

// MariaDB is a private MariaDB (or MySQL) server, listening only on a Unix
// socket in its folder (no TCP), whose root user has an empty password.
type MariaDB struct {
	bin  string // mariadbd or mysqld
	dir  string
	data string
	sock string
	log  string
	proc *process
}

func lookPath(t testing.TB, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"} {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	t.Fatalf("%s is set but none of %s was found", ReplicasEnv, strings.Join(names, ", "))
	return ""
}

// StartMariaDB installs a data folder (mariadb-install-db) and starts a
// server on it with the extra server options (e.g. "--read-only=ON"). The
// server is killed and its folder removed at the end of t.
func StartMariaDB(t testing.TB, options ...string) *MariaDB {
	t.Helper()
	m := &MariaDB{bin: lookPath(t, "mariadbd", "mysqld")}
	install := lookPath(t, "mariadb-install-db", "mysql_install_db")
	m.dir = privateDir(t, "idemgen-my-")
	m.data, m.sock, m.log = filepath.Join(m.dir, "data"), filepath.Join(m.dir, "mysqld.sock"), filepath.Join(m.dir, "mysqld.log")
	args := []string{"--no-defaults", "--datadir=" + m.data, "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
	args = append(args, m.common()...)
	run(t, install, args...)
	t.Cleanup(func() { m.kill() })
	m.start(t, options...)
	return m
}

// common are the options of both install-db and the server: small, and the
// same InnoDB log size in both.
func (m *MariaDB) common() []string {
	o := []string{"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M"}
	if os.Geteuid() == 0 {
		o = append(o, "--user=root")
	}
	return o
}

func (m *MariaDB) start(t testing.TB, options ...string) {
	t.Helper()
	args := []string{"--no-defaults", "--datadir=" + m.data, "--socket=" + m.sock, "--skip-networking",
		"--pid-file=" + filepath.Join(m.dir, "mysqld.pid"), "--log-error=" + m.log,
		"--performance-schema=OFF", "--max-connections=30", "--innodb-flush-log-at-trx-commit=0"}
	args = append(args, m.common()...)
	args = append(args, options...)
	ready := func() bool {
		c, err := net.Dial("unix", m.sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	p, err := startProcess(exec.Command(m.bin, args...), "mariadbd", m.log, ready)
	if p != nil {
		m.proc = p
	}
	if err != nil {
		t.Fatal(err)
	}
}

// DSN is a go-sql-driver/mysql DSN for root over the socket, on database db
// ("" for none).
func (m *MariaDB) DSN(db string) string { return "root@unix(" + m.sock + ")/" + db }

// Restart shuts the server down cleanly (SIGTERM) and starts it again with
// options instead of the previous ones.
func (m *MariaDB) Restart(t testing.TB, options ...string) {
	t.Helper()
	if err := m.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.proc.exit:
	case <-time.After(serverTimeout):
		t.Fatalf("mariadbd did not shut down within %s\nlog:\n%s", serverTimeout, tail(m.log))
	}
	m.proc = nil
	_ = os.Remove(m.sock)
	m.start(t, options...)
}

func (m *MariaDB) kill() {
	if m.proc == nil {
		return
	}
	m.proc.kill()
	m.proc = nil
}

// ClaimWorks claims a fresh key on st, wants it Acquired, and completes it:
// the store can write.
func ClaimWorks(t testing.TB, st idemrt.Store) {
	t.Helper()
	ctx := context.Background()
	k := idemrt.RecordKey{Scope: "primary", Key: UniqueKey(t, "primary")}
	res, err := st.Claim(ctx, idemrt.ClaimRequest{RecordKey: k, Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.State != idemrt.Acquired {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if err := st.Complete(ctx, idemrt.Completion{RecordKey: k, Epoch: res.Epoch, TTL: time.Hour, Response: &idemrt.SavedResponse{Status: 201}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
}
