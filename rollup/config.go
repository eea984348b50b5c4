package rollup

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/store"
)

// Defaults for Config.
const (
	DefaultRetention = 90 * 24 * time.Hour
	// DefaultHourRetention and DefaultDayRetention are how long hour and
	// day rows are kept; month rows are kept for ever. A range reaching
	// past a tier is answered from the next coarser one, and says so.
	DefaultHourRetention = 30 * 24 * time.Hour
	DefaultDayRetention  = 366 * 24 * time.Hour
	// DefaultMaxBatchBytes is ingest's: room for a batch of the shipper's
	// default size (4 MiB) and for single segments far past its default
	// 8 MiB rotation size, and not much more, so a small compressed body
	// cannot make the aggregator allocate far past a real batch.
	DefaultMaxBatchBytes = ingest.DefaultMaxBatchBytes
	// DefaultLateWindow: how long after a visit's last event its state is
	// kept, so an event that arrives that late still joins it. Older
	// events are folded too, into visits of their own.
	DefaultLateWindow = 48 * time.Hour
	// retentionInterval is how often the background goroutine drops days.
	retentionInterval = time.Hour
	// futureSlack bounds how far past the aggregator's clock an event time
	// may be. Edge clocks drift by seconds; an event a day ahead comes from a
	// broken clock and would sit in a day that retention cannot reach.
	futureSlack = 24 * time.Hour
)

// Config configures the aggregator's receiving side.
type Config struct {
	// Dir is the aggregator's own Pebble database (DATA_DIR/aggregator).
	Dir string
	// Retention: whole days whose every event is older than this are
	// dropped. Zero means DefaultRetention.
	Retention time.Duration
	// HourRetention and DayRetention bound the hour and day rollup
	// tiers. Zero means the defaults.
	HourRetention, DayRetention time.Duration
	// MaxActiveVisitors bounds the visitor states held in memory. Zero
	// means 4 Mi (about 1 GiB at the sizes BenchmarkVisitorMemory shows).
	MaxActiveVisitors int
	// Token is the bearer token every shipping node must present.
	Token string
	// MaxBatchBytes bounds one request body once decompressed. Zero means
	// DefaultMaxBatchBytes. The HTTP server's own body limit applies first.
	MaxBatchBytes int64
	// LateWindow: how long a visitor's state outlives its last event, so
	// a late event still joins its visit. Events older than this on
	// arrival are counted in waymark_rollup_events_late_total and folded
	// into visits of their own. Zero means DefaultLateWindow.
	LateWindow time.Duration
	// CheckpointInterval and CheckpointEvents bound how long and how
	// many folded events wait in memory before their rollups are written
	// (checkpoint.go); a read writes them at once. Zero means the
	// defaults.
	CheckpointInterval time.Duration
	CheckpointEvents   int

	// Links reads a link (for its click limit); nil turns click limits off.
	Links func(code string) (store.Link, bool)
	// OnClickLimit is called, on its own goroutine and once per link and
	// limit, when a link's exact non-bot click count reaches its
	// ClickLimit. The node commits the status change through Raft.
	OnClickLimit func(code string)
	// OnStoredClicks receives the clicks of each apply before its commit
	// (clickhook.go); an error fails the apply. It must not keep evs.
	OnStoredClicks func(evs []*ingest.Event) error

	Logger  *slog.Logger
	Metrics *metrics.Set
	Now     func() time.Time
}

// withDefaults validates c and fills in every unset field.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dir == "":
		return c, errors.New("cannot configure rollup: Dir is empty")
	case c.Token == "":
		return c, errors.New("cannot configure rollup: Token is empty")
	case c.Retention < 0 || c.HourRetention < 0 || c.DayRetention < 0:
		return c, errors.New("cannot configure rollup: negative retention")
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.LateWindow < 0 {
		return c, errors.New("cannot configure rollup: negative LateWindow")
	}
	if c.LateWindow == 0 {
		c.LateWindow = DefaultLateWindow
	}
	if c.HourRetention == 0 {
		c.HourRetention = DefaultHourRetention
	}
	if c.DayRetention == 0 {
		c.DayRetention = DefaultDayRetention
	}
	if c.DayRetention < c.HourRetention {
		return c, fmt.Errorf("cannot configure rollup: day rows kept %s, shorter than hour rows (%s)", c.DayRetention, c.HourRetention)
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.CheckpointEvents <= 0 {
		c.CheckpointEvents = DefaultCheckpointEvents
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
