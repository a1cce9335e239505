package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testutil"
)

// TestREADMEExchange replays the curl exchange printed in the repository's
// README.md against a freshly started example and checks that the server
// still answers what the README shows: status line, headers (but Date and
// Content-Length) and body, with generated ids and timestamps normalised.
func TestREADMEExchange(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	exchanges := parseConsoleBlocks(t, string(readme))
	if len(exchanges) < 3 {
		t.Fatalf("found %d curl exchanges in README.md, want the first call, the retry and the 422", len(exchanges))
	}
	p := start(t, "-db", filepath.Join(t.TempDir(), "payments.db"))
	for i, ex := range exchanges {
		r := p.mustCall(ex.method, strings.TrimPrefix(ex.url, "http://localhost:8080"), "", "", ex.body, ex.headers...)
		if got := r.status; got != ex.status {
			t.Errorf("exchange %d (%s %s): status %d, README shows %d", i+1, ex.method, ex.url, got, ex.status)
		}
		for name, want := range ex.wantHeaders {
			if got := r.header.Get(name); normalise(got) != normalise(want) {
				t.Errorf("exchange %d: %s: %q, README shows %q", i+1, name, got, want)
			}
		}
		if got, want := normalise(strings.TrimSpace(string(r.body))), normalise(ex.wantBody); got != want {
			t.Errorf("exchange %d: body\n got %s\nREADME %s", i+1, got, want)
		}
	}
}

type exchange struct {
	method, url, body string
	headers           []string // "Name: value"
	status            int
	wantHeaders       map[string]string
	wantBody          string
}

var (
	idRE   = regexp.MustCompile(`\b(ch|re)_[0-9a-f]{24}\b`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z`)
	argRE  = regexp.MustCompile(`(-[a-zA-Z]+)\s+'([^']*)'|(-[a-zA-Z]+)|(\S+)`)
)

func normalise(s string) string {
	return timeRE.ReplaceAllString(idRE.ReplaceAllString(s, "${1}_ID"), "TIME")
}

// parseConsoleBlocks reads every ```console block that starts with
// "$ curl": the command (with \ continuations), then the response.
func parseConsoleBlocks(t *testing.T, md string) []exchange {
	var out []exchange
	blocks := strings.Split(md, "```console\n")[1:]
	for _, b := range blocks {
		b = b[:strings.Index(b, "```")]
		sc := bufio.NewScanner(strings.NewReader(b))
		var cmd strings.Builder
		var rest []string
		inCmd := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "$ curl "):
				inCmd = true
				cmd.WriteString(strings.TrimPrefix(line, "$ "))
			case inCmd:
				cmd.WriteString(" " + strings.TrimSpace(line))
			default:
				rest = append(rest, line)
			}
			if inCmd && !strings.HasSuffix(line, "\\") {
				inCmd = false
			}
		}
		if cmd.Len() == 0 {
			continue
		}
		ex := exchange{method: "GET", wantHeaders: map[string]string{}}
		for _, m := range argRE.FindAllStringSubmatch(strings.ReplaceAll(cmd.String(), "\\", ""), -1) {
			switch {
			case m[1] == "-H":
				ex.headers = append(ex.headers, m[2])
			case m[1] == "-d":
				ex.body, ex.method = m[2], "POST"
			case m[1] == "-X":
				ex.method = m[2]
			case strings.HasPrefix(m[4], "http"):
				ex.url = m[4]
			}
		}
		if len(rest) == 0 {
			t.Fatalf("README curl block without a response: %s", cmd.String())
		}
		f := strings.Fields(rest[0])
		if len(f) < 2 {
			t.Fatalf("README response without a status line: %q", rest[0])
		}
		var err error
		if ex.status, err = strconv.Atoi(f[1]); err != nil {
			t.Fatalf("README status line %q: %v", rest[0], err)
		}
		i := 1
		for ; i < len(rest) && rest[i] != ""; i++ {
			name, value, _ := strings.Cut(rest[i], ": ")
			if name != "Date" && name != "Content-Length" {
				ex.wantHeaders[name] = value
			}
		}
		ex.wantBody = strings.TrimSpace(strings.Join(rest[min(i, len(rest)):], "\n"))
		out = append(out, ex)
	}
	return out
}
