// Package rollup is the aggregator: it receives sealed event segments from
// every node, keeps raw events by day, deduplicates, builds visits and
// rollups (HyperLogLog unique visitors) and answers the stats API.
//
// It is the one package edge and ingest never import: events reach it only
// as shipped segment files.
//
// # Metrics
//
// Every metric leaves out bot-flagged events; those are counted apart
// (bot_clicks, bot_events). Averages are divided at read time from summed
// totals, never averaged again, and rounded to two decimals.
//
//   - clicks: non-bot click events on a link, exact.
//   - unique_visitors / visitors: distinct visitor hashes (of clicks; of
//     pageviews and custom events for sites), a HyperLogLog estimate.
//   - visit: a visitor's run of site events with no gap over 30 minutes,
//     containing at least one pageview or custom event. It counts once, in
//     the hour of its first event, whatever days it spans.
//   - visits: visits that started in the range.
//   - pageviews: pageview events in the range (for visit dimensions such as
//     source or country: the pageviews of the visits counted there).
//   - views_per_visit: pageviews of the visits / visits.
//   - bounce_rate: visits with exactly one pageview / visits, percent 0-100.
//   - visit_duration: mean of (last event time - first event time) over
//     the visits, in seconds; engagement events count, so a one-page visit
//     with an engagement event has a real duration.
//   - time_on_page: engaged time of engagement events / pageviews, seconds.
//   - scroll_depth: mean scroll depth of engagement events, percent.
//   - events: custom events (not pageviews or engagements).
//   - current_visitors: distinct visitor hashes with a non-bot site event in
//     the last 5 minutes, exact, from the raw events.
//
// Dimensions of a visit (source, referrer, UTM, country, device, browser,
// OS, entry and exit page) come from its first event or first and last
// pageview; page and event name are the event's own.
package rollup
