// Package templates renders the SQL schema, the sqlc inputs and the typed key
// store (sqlc's output plus the adapter to the runtime's Store interface) for
// one SQL dialect.
package templates

// Dialects idemgen emits stores for.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
	MySQL    = "mysql"
)

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
	return nil, errNotYet
}
