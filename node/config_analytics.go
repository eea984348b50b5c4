package node

import (
	"fmt"
	"net/url"

	"github.com/waymark/waymark/rollup/clickhouse"
)

// Analytics stores (--analytics-store).
const (
	StorePebble     = "pebble"
	StoreClickHouse = "clickhouse"
)

// validateAnalytics checks --analytics-store, the --clickhouse-* flags
// and the --aggregator-url list.
func (c *Config) validateAnalytics() error {
	switch c.AnalyticsStore {
	case "":
		c.AnalyticsStore = StorePebble
	case StorePebble, StoreClickHouse:
	default:
		return fmt.Errorf("%w: --analytics-store %q (want pebble or clickhouse)", ErrBadConfig, c.AnalyticsStore)
	}
	if c.AnalyticsStore == StorePebble {
		if c.ClickHouseURL != "" || c.ClickHouseUser != "" || c.ClickHousePasswordFile != "" {
			return fmt.Errorf("%w: --clickhouse-url, --clickhouse-user and --clickhouse-password-file need --analytics-store clickhouse", ErrBadConfig)
		}
	} else {
		if !c.HasRole(RoleAggregator) {
			return fmt.Errorf("%w: --analytics-store clickhouse is the aggregator's store; this node has no aggregator role (give it --role aggregator, or drop the flag)", ErrBadConfig)
		}
		if c.ClickHouseURL == "" {
			return fmt.Errorf("%w: --analytics-store clickhouse needs --clickhouse-url http://HOST:8123 (ClickHouse's HTTP interface)", ErrBadConfig)
		}
		if _, err := clickhouse.New(clickhouse.Config{URL: c.ClickHouseURL, Database: c.ClickHouseDatabase}); err != nil {
			return fmt.Errorf("%w: --clickhouse-url / --clickhouse-database: %w", ErrBadConfig, err)
		}
		if c.ClickHouseLateness <= 0 {
			return fmt.Errorf("%w: --clickhouse-lateness %v: want a positive duration such as 5m", ErrBadConfig, c.ClickHouseLateness)
		}
		if c.ClickHouseMarkSettle < 0 {
			return fmt.Errorf("%w: --clickhouse-mark-settle %v: want 0 or a positive duration such as 20s", ErrBadConfig, c.ClickHouseMarkSettle)
		}
		if c.ClickHousePasswordFile != "" {
			if _, err := clickhouse.ReadPasswordFile(c.ClickHousePasswordFile); err != nil {
				return fmt.Errorf("%w: --clickhouse-password-file: %w", ErrBadConfig, err)
			}
		}
	}
	for _, u := range splitList(c.AggregatorURL) {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%w: --aggregator-url %q: want http(s)://HOST:PORT, or several comma-separated", ErrBadConfig, u)
		}
	}
	return nil
}

// aggregatorURLs is the --aggregator-url list.
func (c *Config) aggregatorURLs() []string { return splitList(c.AggregatorURL) }
