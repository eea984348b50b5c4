// Package query owns the contract between the stats APIs and the stores
// that answer them: the Backend interface, the ranges, granularities and
// filters a question is asked with, the answers' types, and the metric
// definitions below, which every backend computes alike. It imports no
// store and no HTTP: rollup/api asks, a backend (the embedded Pebble store
// in package rollup today; ClickHouse in rollup/clickhouse) answers.
//
// # Metrics
//
// Site metrics follow Plausible's definitions (rollup/plausible/DESIGN.md
// cites the Plausible source of each); bot-flagged events are counted
// apart (bot_clicks, bot_events) and nowhere else.
//
//   - clicks: non-bot click events on a link, exact.
//   - visitors: distinct visitor ids with an event in the range (for a
//     site, the id of the visit's first event, so a visit past midnight UTC
//     counts once); exact up to 128, then a HyperLogLog estimate (p = 14,
//     0.81 % standard error).
//   - visit: a visitor's events with no gap over 30 minutes of activity,
//     with at least one pageview or custom event (engagement events keep a
//     visit alive but never start one). A range counts every visit it
//     overlaps.
//   - visits, bounce_rate, visit_duration, views_per_visit: over those
//     visits. Bounce: at most one pageview and no interactive custom event.
//     Duration: from the first event to the last that is not an
//     engagement, in whole seconds.
//   - pageviews, events: pageview and custom events in the range.
//   - time_on_page, scroll_depth: engaged time over the visits that engaged
//     on the page, and the mean of each visit's deepest scroll there.
//   - current_visitors: distinct visitors with a non-bot site event in the
//     last 5 minutes, exact, from the raw events.
//
// Visit dimensions (source, channel, referrer, UTM, country, device,
// browser, OS, visitor type, entry and exit page) come from the visit's
// first event, first pageview and last pageview; page, event name and
// custom properties are the event's own.
package query
