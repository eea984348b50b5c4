package clickhouse

const childEnv = "WAYMARK_CH_TEST_CHILD"

func childMain() int { return 0 }
