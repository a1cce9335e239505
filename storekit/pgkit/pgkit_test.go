package pgkit

import (
	"os/exec"
	"strings"
	"testing"

	_ "github.com/idemgen/idemgen/internal/testutil" // -update
	idemrt "github.com/idemgen/idemgen/runtime"
)

func TestLiterals(t *testing.T) {
	type params struct {
		Tag     string
		Key     []byte
		Lease   int64
		Version int32
		Odd     string
		Nul     string
	}
	p := params{Tag: `a'b\`, Key: []byte{0, 0xff}, Lease: -5, Version: 2, Odd: "\xff'", Nul: "a\x00'"}
	for _, c := range []struct {
		quoted bool
		want   []string
	}{
		{true, []string{`'a''b\'`, `'\x00ff'`, "(-5)", "(2)",
			"convert_from(decode('ff27', 'hex'), 'UTF8')", "convert_from(decode('610027', 'hex'), 'UTF8')"}},
		{false, []string{"convert_from(decode('6127625c', 'hex'), 'UTF8')", "decode('00ff', 'hex')", "(-5)", "(2)",
			"convert_from(decode('ff27', 'hex'), 'UTF8')", "convert_from(decode('610027', 'hex'), 'UTF8')"}},
	} {
		got, err := literals(p, c.quoted)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " | ") != strings.Join(c.want, " | ") {
			t.Errorf("literals(quoted %v) = %q, want %q", c.quoted, got, c.want)
		}
	}
	if _, err := literals(struct{ F float64 }{1}, true); err == nil {
		t.Error("a float field: no error")
	}
	if _, err := literals(42, true); err == nil {
		t.Error("not a struct: no error")
	}
}

func TestParseOutcome(t *testing.T) {
	for in, want := range map[string]Outcome{
		"acquired 17":               {Kind: "acquired", Epoch: 17},
		"takeover 9007199254740993": {Kind: "takeover", Epoch: 9007199254740993},
		"held":                      {Kind: "held"},
		"live":                      {Kind: "live"},
	} {
		if got, err := parseOutcome(in); err != nil || got != want {
			t.Errorf("parseOutcome(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "acquired", "acquired x", "takeover 1.5", "won 3", "idemgen"} {
		if _, err := parseOutcome(in); err == nil {
			t.Errorf("parseOutcome(%q): no error", in)
		}
	}
}

// TestLockKey pins the advisory lock of a key: stores of two idemgen
// versions on one table must lock a key alike.
func TestLockKey(t *testing.T) {
	k := idemrt.RecordKey{Scope: "op", Key: "k"}
	k.PrincipalHash[0] = 1
	if got := LockKey(k); got != LockKey(k) {
		t.Fatal("LockKey is not a function of the key")
	}
	other := k
	other.Key = "l"
	if LockKey(k) == LockKey(other) {
		t.Error("two keys share a lock")
	}
	// The scope and key are separated: ("ab", "c") and ("a", "bc") differ.
	a, b := idemrt.RecordKey{Scope: "ab", Key: "c"}, idemrt.RecordKey{Scope: "a", Key: "bc"}
	if LockKey(a) == LockKey(b) {
		t.Error("the scope runs into the key")
	}
}

// TestDependencies: pgkit imports the runtime, storekit's packages, the
// standard library and pgx only (what a generated PostgreSQL store imports
// anyway).
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/idemgen/idemgen/storekit/pgkit").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(p, "github.com/idemgen/idemgen/runtime"),
			strings.HasPrefix(p, "github.com/idemgen/idemgen/storekit"),
			strings.HasPrefix(p, "github.com/idemgen/idemgen/internal/"),
			strings.HasPrefix(p, "github.com/jackc/"),
			strings.HasPrefix(p, "golang.org/x/"):
		default:
			t.Errorf("pgkit depends on %s", p)
		}
	}
}
