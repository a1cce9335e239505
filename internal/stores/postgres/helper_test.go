package postgres

const helperEnv = "IDEMGEN_PG_HELPER"

func helperMain(mode string) int { return 2 }
