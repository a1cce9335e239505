package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idemgen keys runs idemgen-keys with its arguments and exit code, and
// says how to install it when it is missing.
func TestKeysRunsTheKeysTool(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "inspect"}, nil, &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "go install github.com/idemgen/idemgen/cmd/idemgen-keys") {
		t.Fatalf("without idemgen-keys: exit %d, %q", code, errb.String())
	}
	fake := "#!/bin/sh\necho \"args: $*\"\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, keysTool), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"keys", "inspect", "-key", "k"}, nil, &out, &errb); code != 3 || out.String() != "args: inspect -key k\n" {
		t.Fatalf("with idemgen-keys: exit %d, %q", code, out.String())
	}
}
