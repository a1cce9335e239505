package sqlite

const helperEnv = "IDEMGEN_SQLITE_HELPER"

func helperMain(mode string) int { return 2 }
