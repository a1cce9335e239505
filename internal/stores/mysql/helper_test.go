package mysql

const helperEnv = "IDEMGEN_MYSQL_HELPER"

func helperMain(mode string) int { return 2 }
