// Package templates renders the SQL schema, the sqlc inputs and the typed key
// store (sqlc's output plus the adapter to the runtime's Store interface) for
// one SQL dialect.
//
// Each dialect's folder holds the files exactly as they are emitted for the
// table "idemgen_keys" in the package "idemstore": the schema, the queries
// and sqlc.yaml, sqlc's Go output for them (committed, so that users need no
// sqlc), and the hand-written adapter idemgen_store.go.tmpl. The common
// folder holds code every dialect shares. Render substitutes the table and
// package names. Refresh sqlc's output after editing a schema or queries:
//
//	go generate ./templates
//
// and check it with IDEMGEN_TEST_SQLC=1 go test ./templates.
package templates

//go:generate go tool -modfile=../tools.mod sqlc generate -f postgres/idemgen_sqlc.yaml
//go:generate go tool -modfile=../tools.mod sqlc generate -f sqlite/idemgen_sqlc.yaml
//go:generate go tool -modfile=../tools.mod sqlc generate -f mysql/idemgen_sqlc.yaml

import (
	"bytes"
	"embed"
	"fmt"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Dialects idemgen emits stores for.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
	MySQL    = "mysql"
)

// Dialects lists the dialects, sorted.
var Dialects = []string{MySQL, Postgres, SQLite}

// DefaultTable is the key table's name when none is configured.
const DefaultTable = "idempotency_keys"

// Placeholders the committed files are written with.
const (
	placeholderTable   = "idemgen_keys"
	placeholderPackage = "idemstore"
)

//go:embed common postgres sqlite mysql
var files embed.FS

// Data is what the store templates are rendered with.
type Data struct {
	// Package is the Go package name of the generated code.
	Package string
	// Dialect is Postgres, SQLite or MySQL.
	Dialect string
	// Table is the key table's name (validated by ValidateTable).
	Table string
}

// Render returns the store files for d, file name -> content. Every name
// starts with "idemgen_".
func Render(d Data) (map[string][]byte, error) {
	if !slices.Contains(Dialects, d.Dialect) {
		return nil, fmt.Errorf("unknown SQL dialect %q (want %s)", d.Dialect, strings.Join(Dialects, ", "))
	}
	if !token.IsIdentifier(d.Package) || d.Package == "_" {
		return nil, fmt.Errorf("package name %q is not a Go identifier", d.Package)
	}
	if err := ValidateTable(d.Table); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, dir := range []string{"common", d.Dialect} {
		entries, err := fs.ReadDir(files, dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			b, err := files.ReadFile(path.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			name := strings.TrimSuffix(e.Name(), ".tmpl")
			if !strings.HasPrefix(name, "idemgen_") {
				return nil, fmt.Errorf("templates: %s/%s is not named idemgen_*", dir, name)
			}
			out[name] = substitute(b, d)
		}
	}
	return out, nil
}

// substitute writes d's table and package names into a committed file.
// The table placeholder also prefixes the derived names (the consumer table
// and the index), which follow the table's name.
func substitute(b []byte, d Data) []byte {
	b = bytes.ReplaceAll(b, []byte(placeholderTable), []byte(d.Table))
	b = bytes.Replace(b, []byte("\npackage "+placeholderPackage+"\n"), []byte("\npackage "+d.Package+"\n"), 1)
	b = bytes.Replace(b, []byte("package: "+placeholderPackage+"\n"), []byte("package: "+d.Package+"\n"), 1)
	return b
}

// maxTable keeps derived names (the table plus "_expires_at_idx" or
// "_processed_pkey") within PostgreSQL's 63 and MySQL's 64 bytes.
const maxTable = 48

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ValidateTable checks a key table name: lower-case letters, digits and
// underscores, not starting with a digit, at most 48 bytes, not an SQL
// reserved word (the name is written unquoted in every dialect).
func ValidateTable(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("table name is empty")
	case len(name) > maxTable:
		return fmt.Errorf("table name %q is longer than %d bytes", name, maxTable)
	case !tableName.MatchString(name):
		return fmt.Errorf("table name %q must be lower-case letters, digits and underscores, not starting with a digit", name)
	case strings.HasPrefix(name, "sqlite_"), strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("table name %q uses a prefix the database reserves", name)
	case reserved[name]:
		return fmt.Errorf("table name %q is an SQL reserved word", name)
	}
	return nil
}

// reserved holds words reserved in at least one of PostgreSQL, MySQL and
// SQLite that a table name could plausibly be.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		abort action add all alter analyze and any array as asc attach between both by case cast
		check collate column constraint create cross current_date current_time current_timestamp
		current_user database databases default deferrable delete desc distinct div do drop each
		else end except exists explain false fetch for foreign from full grant group having if
		ignore in index inner insert interval intersect into is join key keys kill lateral leading
		left like limit load lock match natural not null of offset on only or order outer over
		partition primary procedure range read references regexp rename replace restrict return
		returning revoke right row rows schema select session_user set show some table then to
		trailing trigger true union unique update usage use user using values view when where
		window with write`) {
		m[w] = true
	}
	return m
}()
