// Package chserver starts and stops a throwaway clickhouse-server for
// tests and benchmarks: a config written into a fresh folder, loopback
// only, free ports, the process in its own group, stopped by PID. The
// benchmark harness (bench/harness) and rollup/clickhouse's tests share
// it. Only settings that ClickHouse 18.16 (Debian's package) and current
// releases both read are used.
package chserver
