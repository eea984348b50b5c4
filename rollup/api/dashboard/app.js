// Waymark dashboard: reads the stats API with the owner's API key and draws
// totals, a time series (inline SVG), breakdowns, a live counter, a link's
// overview, a site's goal conversions and its weekday x hour heatmap.
// No build step, no dependencies, no cookies; the key lives in
// sessionStorage only. Every answer goes through READ, so a renamed field
// is a one-line change there.
'use strict';

(() => {
  // ---- The API contract: every path and field name the page relies on ----
  const BREAKDOWN_LIMIT = 8;
  const enc = encodeURIComponent;
  const PATHS = {
    links: () => '/v1/links?limit=500',
    linkStats: (code, q) => `/v1/links/${enc(code)}/stats?${q.series}`,
    linkBreakdown: (code, dim, q) => `/v1/links/${enc(code)}/stats/breakdown?dimension=${enc(dim)}&limit=${BREAKDOWN_LIMIT}&${q.range}`,
    linkRealtime: (code) => `/v1/links/${enc(code)}/stats/realtime`,
    siteAggregate: (id, q) => `/v1/sites/${enc(id)}/stats/aggregate?${q.range}`,
    siteTimeseries: (id, q) => `/v1/sites/${enc(id)}/stats/timeseries?${q.series}`,
    siteBreakdown: (id, dim, q) => `/v1/sites/${enc(id)}/stats/breakdown?dimension=${enc(dim)}&limit=${BREAKDOWN_LIMIT}&${q.range}`,
    siteRealtime: (id) => `/v1/sites/${enc(id)}/stats/realtime`,
    linkOverview: (code) => `/v1/links/${enc(code)}/stats/overview?tz=${enc(TZ)}`,
    siteGoals: (id, q) => `/v1/sites/${enc(id)}/stats/goals?${q.range}`,
    siteHeatmap: (id, q) => `/v1/sites/${enc(id)}/stats/heatmap?${q.range}`,
    linkExport: (code, q) => `/v1/links/${enc(code)}/stats/export?${q.series}`,
    siteExport: (id, q) => `/v1/sites/${enc(id)}/stats/export?${q.series}`,
  };

  // READ turns each answer into the page's model. Shares are fractions
  // (0..1) of the breakdown's total; "other" is a count (or {count field}).
  const READ = {
    share: (j) => ({ kind: str(j.kind), name: str(j.name), site: str(j.site_id), link: str(j.link), shortURL: str(j.short_url) }),
    links: (j) => arr(j.links).map((l) => ({ code: str(obj(l).code), url: str(obj(l).url), shortURL: str(obj(l).short_url) }))
      .filter((l) => l.code),
    moreLinks: (j) => !!j.next_cursor,
    linkStats: (j) => {
      const t = obj(j.totals);
      return {
        totals: { clicks: num(t.clicks), unique_visitors: num(t.unique_visitors), bot_clicks: num(t.bot_clicks) },
        series: arr(j.series).map((p) => ({ t: parseTime(obj(p).t), clicks: num(p.clicks), unique_visitors: num(p.unique_visitors) })),
        estimated: arr(j.estimated).map(String),
        dropped: num(j.dropped_events),
      };
    },
    siteAggregate: (j) => ({
      totals: {
        visitors: num(j.visitors), visits: num(j.visits), pageviews: num(j.pageviews),
        views_per_visit: num(j.views_per_visit), bounce_rate: num(j.bounce_rate), visit_duration: num(j.visit_duration),
      },
      estimated: arr(j.estimated).map(String),
      dropped: num(j.dropped_events),
    }),
    siteTimeseries: (j) => ({
      series: arr(j.series).map((p) => ({ t: parseTime(obj(p).t), visitors: num(p.visitors), pageviews: num(p.pageviews) })),
      estimated: arr(j.estimated).map(String),
    }),
    // A site breakdown ranks, shares and sums "other" by pageviews for pages
    // and by visits otherwise; a link's by clicks.
    breakdownField: (kind, dim) => (kind === 'link' ? 'clicks' : dim === 'page' ? 'pageviews' : 'visits'),
    breakdown: (j, field) => {
      const other = j.other && typeof j.other === 'object' ? j.other[field] : j.other;
      return {
        total: num(j.total),
        rows: arr(j.results).map((r) => ({ value: obj(r).value == null ? '' : String(r.value), count: num(r[field]), share: num(r.share) })),
        other: num(other),
      };
    },
    linkRealtime: (j) => ({
      now: num(j.last_5_minutes), lastMinute: num(j.last_minute), lastHour: num(j.last_hour),
      recent: arr(j.recent).map((r) => ({ t: parseTime(obj(r).time ?? r.t), country: str(r.country), device: str(r.device), referrer: str(r.referrer) })),
    }),
    siteRealtime: (j) => ({ now: num(j.current_visitors), pageviews: j.pageviews_last_5_minutes == null ? null : num(j.pageviews_last_5_minutes) }),
    // Windows are {clicks, uniques}; growth is a percent or null.
    linkOverview: (j) => {
      const w = (v) => ({ clicks: num(obj(v).clicks), uniques: num(obj(v).unique_visitors) });
      const peak = j.peak_hour && typeof j.peak_hour === 'object' ? { hour: num(j.peak_hour.hour), clicks: num(j.peak_hour.clicks) } : null;
      return {
        today: w(j.today), yesterday: w(j.yesterday), last7: w(j.last_7_days), last30: w(j.last_30_days),
        allTime: num(j.all_time_clicks),
        daily: j.daily_growth == null ? null : num(j.daily_growth),
        weekly: j.weekly_growth == null ? null : num(j.weekly_growth),
        lastClick: j.last_click ? parseTime(j.last_click) : null,
        peak,
      };
    },
    siteGoals: (j) => ({
      total: num(j.total_visitors),
      goals: arr(j.goals).map((g) => ({
        id: str(obj(g).id), name: str(g.display_name) || str(g.event_name) || str(g.page_path),
        type: str(g.goal_type), visitors: num(g.visitors), events: num(g.events), cr: num(g.conversion_rate),
      })),
    }),
    // pageviews and visits: 7 rows (Monday first) of 24 hours.
    siteHeatmap: (j) => {
      const grid = (m) => Array.from({ length: 7 }, (_, d) => Array.from({ length: 24 }, (_, h) => num(arr(arr(m)[d])[h])));
      return { pageviews: grid(j.pageviews), visits: grid(j.visits), clipped: !!j.clipped, hoursFrom: parseTime(j.hours_from) };
    },
    problem: (j) => ({ type: str(obj(j).type), detail: str(obj(j).detail) || str(obj(j).title) }),
  };

  // What each kind of report shows.
  const KINDS = {
    link: {
      noun: 'clicks', event: 'click',
      totals: [
        { key: 'clicks', label: 'Clicks' },
        { key: 'unique_visitors', label: 'Unique visitors' },
        { key: 'bot_clicks', label: 'Bot clicks', hint: 'Not counted anywhere else' },
      ],
      lines: [{ key: 'clicks', label: 'Clicks' }, { key: 'unique_visitors', label: 'Unique visitors' }],
      live: 'Clicks · last 5 min',
      breakdowns: [
        { title: 'Referrers', dims: [['referrer', 'Referrer']] },
        { title: 'Campaigns', dims: [['utm_source', 'Source'], ['utm_medium', 'Medium'], ['utm_campaign', 'Campaign']] },
        { title: 'Countries', dims: [['country', 'Country']] },
        { title: 'Technology', dims: [['device', 'Device'], ['browser', 'Browser'], ['os', 'OS']] },
      ],
    },
    site: {
      noun: 'visitors', event: 'pageview',
      totals: [
        { key: 'visitors', label: 'Visitors' },
        { key: 'visits', label: 'Visits' },
        { key: 'pageviews', label: 'Pageviews' },
        { key: 'views_per_visit', label: 'Views per visit', format: 'decimal' },
        { key: 'bounce_rate', label: 'Bounce rate', format: 'percent', hint: 'Visits with one pageview' },
        { key: 'visit_duration', label: 'Visit duration', format: 'duration', hint: 'Average per visit' },
      ],
      lines: [{ key: 'visitors', label: 'Visitors' }, { key: 'pageviews', label: 'Pageviews' }],
      live: 'Visitors now',
      breakdowns: [
        { title: 'Top pages', dims: [['page', 'Page'], ['entry_page', 'Entry page'], ['exit_page', 'Exit page']] },
        { title: 'Top sources', dims: [['source', 'Source'], ['channel', 'Channel'], ['referrer', 'Referrer'], ['utm_campaign', 'Campaign']] },
        { title: 'Locations', dims: [['country', 'Country'], ['region', 'Region']] },
        { title: 'Technology', dims: [['device', 'Device'], ['browser', 'Browser'], ['browser_version', 'Browser version'], ['os', 'OS'], ['os_version', 'OS version']] },
      ],
    },
  };

  const LABELS = { clicks: 'Clicks', visits: 'Visits', pageviews: 'Pageviews', visitors: 'Visitors' };
  // A breakdown's count column, where Plausible names it for the dimension.
  const COUNT_LABELS = { entry_page: 'Entrances', exit_page: 'Exits' };
  const WEEKDAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];

  // 7 and 30 days end yesterday, as Plausible's 7d and 30d do.
  const RANGES = {
    today: { days: 1, granularity: 'hour', label: 'Today', endsToday: true },
    '7d': { days: 7, granularity: 'day', label: 'Last 7 days' },
    '30d': { days: 30, granularity: 'day', label: 'Last 30 days' },
  };
  const LIVE_EVERY_MS = 5000;
  const KEY_STORE = 'waymark.dashboard.key';

  // ---- State and start-up ----
  const state = {
    key: '', kind: 'link', link: '', site: '', range: '7d', links: [], moreLinks: false,
    gen: 0, liveGen: 0, liveTimer: 0, liveFails: 0, chart: null, resizeTimer: 0,
    heatmap: null, heatMetric: 'pageviews',
  };
  const TZ = safe(() => Intl.DateTimeFormat().resolvedOptions().timeZone, '') || 'UTC';
  const $ = (id) => document.getElementById(id);
  const id = () => (state.kind === 'link' ? state.link : state.site);
  // A shared dashboard (/share/{token}) reads its one site or link under
  // its own path, with no key: the token is in the path, and a password
  // share's unlock cookie goes along (same origin).
  const SHARE = (/^\/share\/([A-Za-z0-9_-]{22})$/.exec(location.pathname) || [])[1] || '';

  function start() {
    const oops = (what) => showBanner(`Something went wrong on this page: ${what || 'unknown error'}`);
    window.addEventListener('error', (e) => oops(e && e.message));
    window.addEventListener('unhandledrejection', (e) => oops(e && e.reason && e.reason.message));
    readHash();
    on($('connect-form'), 'submit', (e) => {
      e.preventDefault();
      const key = $('key').value.trim();
      return key ? connect(key) : showConnect('Paste an API key first.');
    });
    on($('disconnect'), 'click', () => forgetKey(''));
    on($('export'), 'click', () => exportZip());
    on($('link-select'), 'change', () => { state.link = $('link-select').value; writeHash(); return load(); });
    on($('site-form'), 'submit', (e) => { e.preventDefault(); state.site = $('site-id').value.trim(); writeHash(); return load(); });
    for (const b of $('kind').querySelectorAll('button')) on(b, 'click', () => setKind(b.dataset.kind));
    for (const b of $('range').querySelectorAll('button')) {
      on(b, 'click', () => { state.range = b.dataset.range; writeHash(); if (SHARE) { for (const x of $('range').querySelectorAll('button')) x.setAttribute('aria-pressed', String(x.dataset.range === state.range)); } else syncControls(); return load(); });
    }
    for (const b of $('heatmap-metric').querySelectorAll('button')) {
      on(b, 'click', () => { state.heatMetric = b.dataset.metric; syncHeatMetric(); return state.heatmap && renderHeatmap(state.heatmap); });
    }
    on(document, 'visibilitychange', () => { if (!document.hidden) scheduleLive(0); });
    window.addEventListener('resize', () => {
      clearTimeout(state.resizeTimer);
      state.resizeTimer = setTimeout(guard(() => state.chart && drawChart(state.chart)), 120);
    });
    syncHeatMetric();
    if (SHARE) return openShare();
    const saved = safe(() => sessionStorage.getItem(KEY_STORE), '');
    return saved ? connect(saved) : showConnect('');
  }

  // guard keeps a handler from ever throwing into the page.
  function guard(fn) {
    const fail = (e) => showBanner(`Something went wrong: ${(e && e.message) || e}`);
    return function (...args) {
      try {
        const r = fn.apply(this, args);
        if (r && typeof r.catch === 'function') r.catch(fail);
      } catch (e) {
        fail(e);
      }
    };
  }

  function on(node, type, fn) { node.addEventListener(type, guard(fn)); }

  // ---- Talking to the server: never rejects, always {ok, status, ...} ----
  async function api(path) {
    let res;
    try {
      res = await request(path, 'application/json');
    } catch (e) {
      return { ok: false, status: 0, detail: 'Cannot reach the server. Check the connection and try again.' };
    }
    let body = null;
    try { body = JSON.parse(await res.text()); } catch (e) { body = null; }
    if (res.ok) {
      return body && typeof body === 'object'
        ? { ok: true, status: res.status, data: body }
        : { ok: false, status: res.status, detail: 'The server sent an answer this page cannot read.' };
    }
    const p = READ.problem(body);
    // A share whose unlock expired asks for its password again.
    if (SHARE && res.status === 401) safe(() => location.reload());
    return { ok: false, status: res.status, type: p.type, detail: p.detail || `The server answered ${res.status}.` };
  }

  // request fetches an API path: with the key, or under the share's path
  // with its cookie.
  function request(path, accept) {
    return fetch(SHARE ? `/share/${SHARE}${path}` : path, SHARE
      ? { headers: { Accept: accept }, cache: 'no-store', credentials: 'same-origin', referrerPolicy: 'no-referrer' }
      : {
        headers: { Authorization: `Bearer ${state.key}`, Accept: accept },
        cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      });
  }

  // ---- Export: the range as a zip of CSV files, saved by the browser ----
  async function exportZip() {
    if (!id()) return undefined;
    const q = rangeQuery(RANGES[state.range]);
    const path = state.kind === 'link' ? PATHS.linkExport(id(), q) : PATHS.siteExport(id(), q);
    const btn = $('export');
    btn.disabled = true;
    btn.textContent = 'Exporting…';
    try {
      let res;
      try {
        res = await request(path, 'application/zip');
      } catch (e) {
        return showBanner('Cannot reach the server. Check the connection and try again.');
      }
      if (!res.ok) {
        let p = { detail: '' };
        try { p = READ.problem(JSON.parse(await res.text())); } catch (e) { /* not JSON */ }
        return showBanner(`The export failed: ${p.detail || `the server answered ${res.status}`}`);
      }
      const blob = await res.blob();
      const name = (/filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '') || [])[1] || 'waymark-export.zip';
      const a = el('a', '', '');
      a.href = URL.createObjectURL(blob);
      a.download = name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
      return undefined;
    } finally {
      btn.disabled = false;
      btn.textContent = 'Export CSV';
    }
  }

  // ---- A shared dashboard: one site or link, read-only, no key ----
  async function openShare() {
    const r = await api('/about');
    if (!r.ok) {
      $('app').hidden = false;
      return showBanner(r.status === 404 ? 'This shared dashboard does not exist or was revoked.' : `Could not open the shared dashboard: ${r.detail}`);
    }
    const a = READ.share(r.data);
    document.body.classList.add('is-share');
    state.key = 'share'; // the live counter runs while a "key" is set
    if (a.kind === 'site') Object.assign(state, { kind: 'site', site: a.site, link: '' });
    else Object.assign(state, { kind: 'link', link: a.link, site: '', links: [{ code: a.link, url: '', shortURL: a.shortURL }] });
    if (a.name) document.title = `${a.name} · Waymark`;
    $('connect').hidden = true;
    $('session').hidden = true;
    $('kind').hidden = true;
    $('link-pick').hidden = true;
    $('site-form').hidden = true;
    $('app').hidden = false;
    for (const b of $('range').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.range === state.range));
    writeHash();
    return load();
  }

  // ---- Connecting ----
  async function connect(key) {
    state.key = key;
    const btn = $('connect-btn');
    btn.disabled = true;
    btn.textContent = 'Checking…';
    const r = await api(PATHS.links());
    btn.disabled = false;
    btn.textContent = 'Open dashboard';
    if (!r.ok) {
      if (r.status === 401) return forgetKey(`This key was not accepted: ${r.detail}`);
      return showConnect(`Could not open the dashboard: ${r.detail}`);
    }
    safe(() => sessionStorage.setItem(KEY_STORE, key));
    $('key').value = '';
    state.links = READ.links(r.data);
    state.moreLinks = READ.moreLinks(r.data);
    return showApp();
  }

  function forgetKey(message) {
    safe(() => sessionStorage.removeItem(KEY_STORE));
    state.key = '';
    state.gen++;
    stopLive();
    showConnect(message);
  }

  function showConnect(message) {
    $('app').hidden = true;
    $('session').hidden = true;
    $('connect').hidden = false;
    $('connect-error').textContent = message || '';
    $('connect-error').hidden = !message;
    safe(() => $('key').focus());
  }

  function showApp() {
    $('connect').hidden = true;
    $('app').hidden = false;
    $('session').hidden = false;
    $('key-chip').textContent = `Key ••••${state.key.slice(-4)}`;
    if (state.link && !findLink(state.link)) {
      // A code from the address bar that is not in the first page of links.
      state.links.unshift({ code: state.link, url: '', shortURL: '' });
    }
    if (!state.link && state.links.length) state.link = state.links[0].code;
    fillLinks();
    $('site-id').value = state.site;
    syncControls();
    writeHash();
    return load();
  }

  function fillLinks() {
    const sel = $('link-select');
    clear(sel);
    for (const l of state.links) {
      const o = el('option', '', l.url ? `${l.code}  —  ${shorten(stripScheme(l.url), 56)}` : l.code);
      o.value = l.code;
      sel.appendChild(o);
    }
    if (state.moreLinks) {
      const more = el('option', '', `Showing your first ${state.links.length} links`);
      more.disabled = true;
      sel.appendChild(more);
    }
    sel.disabled = !state.links.length;
    sel.value = state.link;
  }

  const findLink = (code) => state.links.find((l) => l.code === code) || null;

  function setKind(kind) {
    if (!KINDS[kind] || kind === state.kind) return undefined;
    state.kind = kind;
    if (kind === 'link' && !state.link && state.links.length) state.link = state.links[0].code;
    $('link-select').value = state.link;
    syncControls();
    writeHash();
    if (kind === 'site' && !state.site) safe(() => $('site-id').focus());
    return load();
  }

  function syncControls() {
    for (const b of $('kind').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.kind === state.kind));
    for (const b of $('range').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.range === state.range));
    $('link-pick').hidden = state.kind !== 'link';
    $('site-form').hidden = state.kind !== 'site';
  }

  // ---- Loading a report ----
  async function load() {
    const gen = ++state.gen;
    stopLive();
    hideBanner();
    const kind = KINDS[state.kind];
    if (!id()) {
      state.chart = null;
      if (state.kind === 'site') return showEmpty('Pick a site', 'Type the id of one of your sites above to see its visitors.', '');
      return showEmpty('No links yet', 'Create a short link and its clicks show up here within seconds.',
        `curl -X POST ${location.origin}/v1/links \\\n  -H "Authorization: Bearer $WAYMARK_KEY" \\\n  -d '{"url":"https://example.com/"}'`);
    }
    $('empty').hidden = true;
    $('report').hidden = false;
    renderSubject();
    renderTotalsLoading(kind);
    renderBreakdownCards(kind);
    $('recent-card').hidden = state.kind !== 'link';
    clear($('recent'));
    $('chart').classList.add('is-loading');
    $('overview-card').hidden = state.kind !== 'link';
    $('extras').hidden = state.kind !== 'site';
    $('goals-card').hidden = state.kind !== 'site';
    $('heatmap-card').hidden = state.kind !== 'site';

    const q = rangeQuery(RANGES[state.range]);
    const stats = state.kind === 'link' ? loadLinkStats(id(), q) : loadSiteStats(id(), q);
    kind.breakdowns.forEach((card, i) => loadBreakdown(gen, i, card.dims[0][0]));
    if (state.kind === 'link') loadOverview(gen, id());
    else {
      loadGoals(gen, id(), q);
      loadHeatmap(gen, id(), q);
    }
    const s = await stats;
    if (gen !== state.gen) return undefined;
    $('chart').classList.remove('is-loading');
    $('totals').dataset.source = s.source;
    if (!s.ok) {
      if (s.status === 401) return forgetKey(`The key is no longer accepted: ${s.detail}`);
      renderTotalsError(kind, s);
      renderUndercount(0);
      renderChartMessage(s.status === 404 ? 'Nothing to show' : 'The numbers could not be loaded', s.detail);
      showBanner(reportError(s));
      $('totals').dataset.state = 'error';
      return undefined;
    }
    renderTotals(kind, s.totals, s.estimated);
    renderUndercount(s.dropped);
    state.chart = { kind, series: s.series, estimated: s.estimated, granularity: RANGES[state.range].granularity };
    drawChart(state.chart);
    $('totals').dataset.state = 'ready';
    return scheduleLive(0);
  }

  function reportError(r) {
    const what = `${state.kind} ${id()}`;
    if (r.status === 404) return `No stats for ${what}: ${r.detail}. It may not exist, or belong to another account.`;
    if (r.status === 0) return r.detail;
    return `Could not load the stats for ${what}: ${r.detail}`;
  }

  async function loadLinkStats(code, q) {
    const source = PATHS.linkStats(code, q);
    const r = await api(source);
    return r.ok ? { ok: true, source, ...READ.linkStats(r.data) } : { ...r, source };
  }

  async function loadSiteStats(site, q) {
    const source = PATHS.siteAggregate(site, q);
    const [agg, ts] = await Promise.all([api(source), api(PATHS.siteTimeseries(site, q))]);
    const bad = [agg, ts].find((r) => !r.ok);
    if (bad) return { ...bad, source };
    const a = READ.siteAggregate(agg.data);
    const t = READ.siteTimeseries(ts.data);
    // Visitors are HyperLogLog estimates whether or not the answer says so.
    const estimated = [...new Set([...a.estimated, ...t.estimated, 'visitors'])];
    return { ok: true, source, totals: a.totals, series: t.series, estimated, dropped: a.dropped };
  }

  async function loadBreakdown(gen, index, dim) {
    const q = rangeQuery(RANGES[state.range]);
    const path = state.kind === 'link' ? PATHS.linkBreakdown(id(), dim, q) : PATHS.siteBreakdown(id(), dim, q);
    const card = $('breakdowns').children[index];
    if (!card) return;
    card.dataset.state = 'loading';
    card.dataset.dimension = dim;
    const r = await api(path);
    if (gen !== state.gen || card.dataset.dimension !== dim) return;
    if (r.ok) {
      renderBreakdown(card, index, dim, READ.breakdown(r.data, READ.breakdownField(state.kind, dim)));
    } else {
      renderCardMessage(card, r.status === 404 ? 'No data' : 'Could not load', r.detail);
    }
    card.dataset.state = r.ok ? 'ready' : 'error';
  }

  // rangeQuery: dates in the browser's zone, both included.
  function rangeQuery(r) {
    const now = new Date();
    const to = r.endsToday ? now : new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1);
    const from = new Date(to.getFullYear(), to.getMonth(), to.getDate() - (r.days - 1));
    const range = `from=${ymd(from)}&to=${ymd(to)}&tz=${enc(TZ)}`;
    return { range, series: `${range}&granularity=${r.granularity}` };
  }

  // ---- A link's overview: range-independent numbers ----
  const OVERVIEW = [
    { key: 'today', label: 'Today' },
    { key: 'yesterday', label: 'Yesterday' },
    { key: 'last7', label: 'Last 7 days' },
    { key: 'last30', label: 'Last 30 days' },
    { key: 'all_time', label: 'All time' },
    { key: 'daily_growth', label: 'Daily growth' },
    { key: 'weekly_growth', label: 'Weekly growth' },
    { key: 'last_click', label: 'Last click' },
    { key: 'peak_hour', label: 'Peak hour' },
  ];

  async function loadOverview(gen, code) {
    const box = $('overview');
    box.dataset.state = 'loading';
    clear(box);
    for (const o of OVERVIEW) box.appendChild(overviewItem(o.key, o.label, '\u00a0', '\u00a0', null, 'is-loading'));
    const r = await api(PATHS.linkOverview(code));
    if (gen !== state.gen) return;
    clear(box);
    if (!r.ok) {
      for (const o of OVERVIEW) box.appendChild(overviewItem(o.key, o.label, '–', r.status === 404 ? 'Not found' : 'Unavailable', null, ''));
      box.dataset.state = 'error';
      return;
    }
    const m = READ.linkOverview(r.data);
    const win = (k, w, sub) => overviewItem(k, OVERVIEW.find((o) => o.key === k).label, fmtInt(w.clicks), sub, w.clicks, '');
    const uniq = (w) => (w.clicks ? `≈ ${fmtInt(w.uniques)} unique visitors` : 'No clicks');
    box.append(
      win('today', m.today, uniq(m.today)),
      win('yesterday', m.yesterday, uniq(m.yesterday)),
      win('last7', m.last7, uniq(m.last7)),
      win('last30', m.last30, uniq(m.last30)),
      overviewItem('all_time', 'All time', fmtInt(m.allTime), 'Exact, every click ever', m.allTime, ''),
      growthItem('daily_growth', 'Daily growth', m.daily, 'Today so far vs yesterday'),
      growthItem('weekly_growth', 'Weekly growth', m.weekly, 'Last 7 days vs the 7 before'),
      lastClickItem(m),
      peakItem(m.peak),
    );
    box.dataset.state = 'ready';
  }

  function overviewItem(key, label, value, sub, raw, cls) {
    const item = el('div', `ov ${cls}`.trim());
    item.dataset.overview = key;
    const v = el('dd', 'ov-value', value);
    if (raw != null) v.dataset.value = String(raw);
    item.append(el('dt', 'ov-label', label), v, el('dd', 'ov-sub', sub));
    return item;
  }

  function growthItem(key, label, g, sub) {
    if (g == null) return overviewItem(key, label, '–', `${sub}: no clicks before`, null, '');
    const text = `${g > 0 ? '+' : g < 0 ? '−' : ''}${fmtExact(Math.abs(g))}%`;
    const item = overviewItem(key, label, text, sub, g, g > 0 ? 'is-up' : g < 0 ? 'is-down' : '');
    item.querySelector('.ov-value').setAttribute('aria-label', `${g > 0 ? 'up' : g < 0 ? 'down' : 'unchanged'} ${fmtExact(Math.abs(g))} percent`);
    return item;
  }

  function lastClickItem(m) {
    if (!m.lastClick) {
      const text = m.allTime > 0 ? 'Over 30 days ago' : 'Never';
      return overviewItem('last_click', 'Last click', text, m.allTime > 0 ? 'None in the last 30 days' : 'No clicks yet', '', '');
    }
    const item = overviewItem('last_click', 'Last click', timeAgo(m.lastClick), dateFmt(m.lastClick, { dateStyle: 'medium', timeStyle: 'short' }), m.lastClick.toISOString(), '');
    item.querySelector('.ov-value').title = m.lastClick.toISOString();
    return item;
  }

  function peakItem(p) {
    if (!p) return overviewItem('peak_hour', 'Peak hour', '–', 'No clicks in the last 30 days', null, '');
    return overviewItem('peak_hour', 'Peak hour', `${pad2(p.hour)}:00–${pad2((p.hour + 1) % 24)}:00`,
      `${fmtInt(p.clicks)} clicks · last 30 days`, p.hour, '');
  }

  // ---- A site's goals: converting visitors and conversion rate ----
  async function loadGoals(gen, site, q) {
    const card = $('goals-card');
    const list = $('goals');
    card.dataset.state = 'loading';
    removeMessage(card);
    clear(list);
    for (let i = 0; i < 3; i++) list.appendChild(el('li', 'bar-row skeleton'));
    const r = await api(PATHS.siteGoals(site, q));
    if (gen !== state.gen) return;
    clear(list);
    if (!r.ok) {
      renderCardMessage(card, r.status === 404 ? 'No data' : 'Could not load', r.detail);
      card.dataset.state = 'error';
      return;
    }
    const m = READ.siteGoals(r.data);
    if (!m.goals.length) {
      renderCardMessage(card, 'No goals yet', `Add one: POST /v1/sites/${site}/goals with {"event_name": "Signup"} or {"page_path": "/thanks"}.`);
    } else {
      const top = Math.max(...m.goals.map((g) => g.visitors)) || 1;
      for (const g of m.goals) list.appendChild(goalRow(g, g.visitors / top));
    }
    card.dataset.state = 'ready';
  }

  function goalRow(g, width) {
    const li = el('li', 'bar-row goal-row');
    li.dataset.goal = g.id;
    const bar = el('span', 'bar');
    bar.style.width = `${(Math.max(0, Math.min(1, width)) * 100).toFixed(1)}%`;
    const label = el('span', 'bar-label');
    label.append(el('span', `goal-kind goal-${g.type}`, g.type === 'page' ? 'Page' : 'Event'), el('span', 'bar-text', g.name));
    label.title = g.name;
    const uniques = el('span', 'bar-num goal-uniques', fmtInt(g.visitors));
    uniques.dataset.value = String(g.visitors);
    const total = el('span', 'bar-num goal-total', fmtInt(g.events));
    total.dataset.value = String(g.events);
    const cr = el('span', 'bar-pct goal-cr', `${fmtExact(g.cr)}%`);
    cr.dataset.value = String(g.cr);
    li.append(bar, label, uniques, total, cr);
    return li;
  }

  // ---- A site's heatmap: weekday x hour in the site's zone ----
  async function loadHeatmap(gen, site, q) {
    const card = $('heatmap-card');
    card.dataset.state = 'loading';
    state.heatmap = null;
    $('heatmap').classList.add('is-loading');
    const r = await api(PATHS.siteHeatmap(site, q));
    if (gen !== state.gen) return;
    $('heatmap').classList.remove('is-loading');
    if (!r.ok) {
      clear($('heatmap'));
      $('heatmap-note').textContent = r.status === 404 ? 'No data' : `Could not load: ${r.detail}`;
      card.dataset.state = 'error';
      return;
    }
    state.heatmap = READ.siteHeatmap(r.data);
    renderHeatmap(state.heatmap);
    card.dataset.state = 'ready';
  }

  function syncHeatMetric() {
    for (const b of $('heatmap-metric').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.metric === state.heatMetric));
  }

  // renderHeatmap draws a table: screen readers read it as one, the
  // numbers are in every cell, colour is four steps of the busiest cell.
  function renderHeatmap(h) {
    const metric = state.heatMetric;
    const grid = h[metric];
    const noun = metric === 'visits' ? 'visits' : 'pageviews';
    const box = $('heatmap');
    clear(box);
    let max = 0, best = null;
    grid.forEach((row, d) => row.forEach((v, hr) => { if (v > max) { max = v; best = [d, hr]; } }));
    const table = el('table', 'heatmap');
    table.dataset.metric = metric;
    table.appendChild(el('caption', 'sr-only', `${metric === 'visits' ? 'Visits' : 'Pageviews'} by weekday and hour`));
    const head = el('tr');
    head.appendChild(el('th', 'hm-corner'));
    for (let hr = 0; hr < 24; hr++) {
      const th = el('th', 'hm-hour', hr % 3 === 0 ? pad2(hr) : '');
      th.scope = 'col';
      th.setAttribute('aria-label', `${pad2(hr)}:00`);
      head.appendChild(th);
    }
    table.appendChild(el('thead')).appendChild(head);
    const body = table.appendChild(el('tbody'));
    grid.forEach((row, d) => {
      const tr = el('tr');
      const th = el('th', 'hm-day', WEEKDAYS[d].slice(0, 3));
      th.scope = 'row';
      th.title = WEEKDAYS[d];
      tr.appendChild(th);
      row.forEach((v, hr) => {
        const level = v > 0 && max > 0 ? Math.max(1, Math.ceil((v / max) * 4)) : 0;
        const td = el('td', `hm-cell hm-${level}`, v > 0 ? fmtAxis(v) : '');
        td.dataset.day = String(d);
        td.dataset.hour = String(hr);
        td.dataset.value = String(v);
        td.title = `${WEEKDAYS[d]} ${pad2(hr)}:00–${pad2((hr + 1) % 24)}:00 · ${fmtExact(v)} ${noun}`;
        if (!v) td.setAttribute('aria-label', `0 ${noun}`);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    box.appendChild(table);
    const note = best
      ? `Busiest: ${WEEKDAYS[best[0]]} ${pad2(best[1])}:00 (${fmtExact(max)} ${noun}).`
      : `No ${noun} in this period.`;
    const zone = ` Hours in ${TZ.replace(/_/g, ' ')}.`;
    const clipped = h.clipped && h.hoursFrom ? ` Hourly numbers start ${dateFmt(h.hoursFrom, { month: 'short', day: 'numeric' })} (kept 30 days).` : '';
    $('heatmap-note').textContent = note + zone + clipped;
  }

  // ---- Live counter: every few seconds while the tab is visible ----
  function scheduleLive(delay) {
    clearTimeout(state.liveTimer);
    state.liveTimer = setTimeout(guard(refreshLive), delay);
  }

  function stopLive() {
    clearTimeout(state.liveTimer);
    state.liveGen++;
  }

  async function refreshLive() {
    if (document.hidden || !state.key || !id()) return undefined;
    const gen = state.liveGen;
    const isLink = state.kind === 'link';
    const r = await api(isLink ? PATHS.linkRealtime(id()) : PATHS.siteRealtime(id()));
    const card = document.querySelector('.stat-live');
    if (gen !== state.liveGen || !card) return undefined;
    if (!r.ok) {
      if (r.status === 401) return forgetKey(`The key is no longer accepted: ${r.detail}`);
      state.liveFails++;
      card.classList.add('is-off');
      setStat(card, null, 'Live numbers unavailable');
      return scheduleLive(Math.min(60000, LIVE_EVERY_MS * 2 ** state.liveFails));
    }
    state.liveFails = 0;
    card.classList.remove('is-off');
    if (isLink) {
      const m = READ.linkRealtime(r.data);
      setStat(card, m.now, `${fmtInt(m.lastMinute)} last minute · ${fmtInt(m.lastHour)} last hour`);
      renderRecent(m.recent);
    } else {
      const m = READ.siteRealtime(r.data);
      setStat(card, m.now, m.pageviews == null ? 'Seen in the last 5 minutes' : `${fmtInt(m.pageviews)} pageviews · last 5 min`);
    }
    return scheduleLive(LIVE_EVERY_MS);
  }

  // ---- Rendering: header, totals, breakdowns, latest clicks ----
  function renderSubject() {
    const sub = $('subject-sub');
    clear(sub);
    if (state.kind === 'link') {
      const l = findLink(state.link) || { code: state.link, url: '', shortURL: '' };
      $('subject-title').textContent = l.shortURL ? stripScheme(l.shortURL) : `/${l.code}`;
      if (l.url) {
        sub.appendChild(el('span', 'arrow', '→ '));
        const a = el('a', 'dest', shorten(stripScheme(l.url), 90));
        Object.assign(a, { href: l.url, rel: 'noopener noreferrer', target: '_blank', title: l.url });
        sub.appendChild(a);
      }
    } else {
      $('subject-title').textContent = state.site;
      sub.textContent = 'Site · pageviews and visits from the Waymark tracker';
    }
    $('subject-range').textContent = `${RANGES[state.range].label} · ${TZ.replace(/_/g, ' ')}`;
  }

  function renderTotalsLoading(kind) {
    const box = $('totals');
    clear(box);
    box.className = `totals kind-${state.kind}`;
    box.dataset.state = 'loading';
    box.dataset.source = '';
    for (const m of kind.totals) box.appendChild(statCard(m, ''));
    box.appendChild(statCard({ key: 'live', label: kind.live }, 'stat-live'));
  }

  function statCard(m, extra) {
    const card = el('div', `stat ${extra} is-loading`);
    card.dataset.metric = m.key;
    const label = el('div', 'stat-label');
    if (m.key === 'live') label.appendChild(el('span', 'pulse'));
    label.appendChild(document.createTextNode(m.label));
    card.append(label, el('div', 'stat-value', '\u00a0'), el('div', 'stat-sub', m.hint || '\u00a0'));
    return card;
  }

  function setStat(card, value, sub, format, estimated) {
    card.classList.remove('is-loading');
    const v = card.querySelector('.stat-value');
    const old = v.dataset.value;
    if (value == null) {
      v.textContent = '–';
      delete v.dataset.value;
    } else {
      v.textContent = (estimated ? '≈ ' : '') + fmtMetric(value, format);
      v.dataset.value = String(value);
      v.title = fmtExact(value) + (estimated ? ' (estimated)' : '');
      if (old != null && old !== String(value)) flash(v);
    }
    card.querySelector('.stat-sub').textContent = sub || '\u00a0';
  }

  function renderTotals(kind, totals, estimated) {
    for (const m of kind.totals) {
      const card = $('totals').querySelector(`[data-metric="${m.key}"]`);
      const est = estimated.includes(m.key);
      if (card) setStat(card, totals[m.key], est ? 'Estimate (HyperLogLog)' : m.hint, m.format, est);
    }
  }

  function renderTotalsError(kind, r) {
    for (const card of $('totals').querySelectorAll('.stat')) {
      setStat(card, null, card.classList.contains('stat-live') ? '' : r.status === 404 ? 'Not found' : 'Unavailable');
    }
  }

  function renderBreakdownCards(kind) {
    const box = $('breakdowns');
    clear(box);
    box.className = `breakdowns cols-${kind.breakdowns.length}`;
    kind.breakdowns.forEach((spec, index) => {
      const card = el('section', 'card breakdown');
      card.dataset.state = 'loading';
      const head = el('div', 'card-head');
      head.appendChild(el('h3', '', spec.title));
      if (spec.dims.length > 1) {
        const tabs = el('div', 'tabs');
        tabs.setAttribute('role', 'group');
        tabs.setAttribute('aria-label', spec.title);
        spec.dims.forEach(([dim, label], i) => {
          const b = el('button', 'tab', label);
          b.type = 'button';
          b.dataset.dim = dim;
          b.setAttribute('aria-pressed', String(i === 0));
          on(b, 'click', () => {
            for (const t of tabs.children) t.setAttribute('aria-pressed', String(t === b));
            return loadBreakdown(state.gen, index, dim);
          });
          tabs.appendChild(b);
        });
        head.appendChild(tabs);
      }
      const cols = el('div', 'bars-head');
      cols.append(el('span'), el('span'));
      const list = el('ol', 'bars');
      for (let i = 0; i < 4; i++) list.appendChild(el('li', 'bar-row skeleton'));
      card.append(head, cols, list);
      box.appendChild(card);
    });
  }

  function renderBreakdown(card, index, dim, b) {
    const spec = KINDS[state.kind].breakdowns[index];
    const dimSpec = spec && spec.dims.find((d) => d[0] === dim);
    const head = card.querySelector('.bars-head');
    if (dimSpec) head.firstChild.textContent = dimSpec[1];
    head.lastChild.textContent = COUNT_LABELS[dim] || LABELS[READ.breakdownField(state.kind, dim)];
    if (!b.rows.length) return renderCardMessage(card, `No ${KINDS[state.kind].noun} yet`, 'Nothing in this period.');
    const list = card.querySelector('.bars');
    clear(list);
    removeMessage(card);
    // Bars are scaled to the biggest row, so the top value reads as full.
    const top = Math.max(b.other, ...b.rows.map((r) => r.count)) || 1;
    for (const r of b.rows) list.appendChild(barRow(dim, r.value, r.count, r.share, r.count / top));
    if (b.other > 0) {
      const row = barRow('other', 'Other', b.other, b.total > 0 ? b.other / b.total : 0, b.other / top);
      row.classList.add('is-other');
      list.appendChild(row);
    }
    return undefined;
  }

  function barRow(dim, value, count, share, width) {
    const li = el('li', 'bar-row');
    const bar = el('span', 'bar');
    bar.style.width = `${(Math.max(0, Math.min(1, width)) * 100).toFixed(1)}%`;
    const n = el('span', 'bar-num', fmtInt(count));
    n.dataset.value = String(count);
    li.append(bar, valueLabel(dim, value, 'bar-label'), n, el('span', 'bar-pct', fmtShare(share)));
    return li;
  }

  // valueLabel shows a breakdown value readably: country names with their
  // code, "Direct / none" for no referrer, capitalised device classes.
  function valueLabel(dim, value, cls) {
    const box = el('span', cls);
    const v = value || '';
    let text = v;
    if (dim === 'country') {
      const code = v.toUpperCase();
      if (/^[A-Z]{2}$/.test(code) && code !== 'XX' && code !== 'ZZ') {
        box.appendChild(el('span', 'cc', code));
        text = safe(() => REGIONS.of(code), code) || code;
      } else {
        text = 'Unknown';
      }
    } else if (dim === 'other') {
      text = 'Other';
    } else if (!v) {
      // Plausible's labels for no value.
      text = { referrer: 'Direct / None', source: 'Direct / None', page: '(none)', entry_page: '(none)', exit_page: '(none)' }[dim] ||
        (dim.startsWith('utm_') || ['device', 'browser', 'browser_version', 'os', 'os_version', 'channel'].includes(dim) ? '(not set)' : 'Unknown');
    } else if (dim === 'device') {
      text = v.charAt(0).toUpperCase() + v.slice(1);
    }
    box.appendChild(el('span', 'bar-text', text));
    box.title = text;
    return box;
  }

  function renderCardMessage(card, title, detail) {
    clear(card.querySelector('.bars'));
    removeMessage(card);
    const box = el('div', 'card-empty');
    box.append(el('strong', '', title), el('span', 'muted', detail || ''));
    card.appendChild(box);
  }

  function removeMessage(card) {
    const old = card.querySelector('.card-empty');
    if (old) old.remove();
  }

  function renderRecent(recent) {
    const list = $('recent');
    clear(list);
    if (!recent.length) {
      list.appendChild(el('li', 'recent-empty muted', 'No clicks in the last hour. New clicks show up here within seconds.'));
      return;
    }
    for (const r of recent.slice(0, 10)) {
      const li = el('li', 'recent-row');
      li.append(
        el('span', 'recent-time', r.t ? timeAgo(r.t) : '–'),
        valueLabel('country', r.country, 'recent-country'),
        valueLabel('device', r.device, 'recent-device'),
        valueLabel('referrer', r.referrer, 'recent-ref'),
      );
      list.appendChild(li);
    }
  }

  function showEmpty(title, text, code) {
    $('report').hidden = true;
    $('empty').hidden = false;
    $('empty-title').textContent = title;
    $('empty-text').textContent = text;
    $('empty-code').textContent = code;
    $('empty-code').hidden = !code;
  }

  function showBanner(message) {
    const b = $('banner');
    if (!b) return;
    b.textContent = message;
    b.hidden = false;
  }

  function hideBanner() { $('banner').hidden = true; }

  // The edges dropped some events of this range before writing them (a
  // full queue or disk): say so, never show the short numbers silently.
  function renderUndercount(dropped) {
    const note = $('undercount');
    note.hidden = !(dropped > 0);
    note.textContent = dropped > 0
      ? `${fmtExact(dropped)} ${dropped === 1 ? 'event' : 'events'} in this range could not be recorded (the edge was overloaded or its disk full); the numbers below are short by up to that much.`
      : '';
  }

  // ---- The chart: inline SVG, straight segments, one point per entry ----
  const SVGNS = 'http://www.w3.org/2000/svg';

  function renderChartMessage(title, detail) {
    clear($('chart'));
    clear($('legend'));
    const m = el('div', 'chart-empty');
    m.append(el('strong', '', title), el('span', 'muted', detail || ''));
    $('chart').appendChild(m);
    state.chart = null;
  }

  function drawChart(model) {
    const box = $('chart');
    clear(box);
    const series = model.series.filter((p) => p.t);
    const { lines } = model.kind;
    renderLegend(lines, model.estimated);
    if (!series.length) {
      const m = el('div', 'chart-empty');
      m.append(el('strong', '', `No ${model.kind.noun} in this period`),
        el('span', 'muted', `Numbers show up here a few seconds after the first ${model.kind.event}.`));
      box.appendChild(m);
      return;
    }
    const W = Math.max(280, box.clientWidth - 24 || 640);
    const H = W < 560 ? 200 : 260;
    const maxV = Math.max(0, ...series.flatMap((p) => lines.map((l) => p[l.key])));
    const ticks = niceTicks(maxV);
    const top = ticks[ticks.length - 1];
    const padL = 14 + 7 * fmtAxis(top).length, padR = 12, padT = 12, padB = 28;
    const plotW = W - padL - padR, plotH = H - padT - padB;
    const n = series.length;
    const xAt = (i) => padL + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1));
    const yAt = (v) => padT + plotH - (top ? (v / top) * plotH : 0);
    const first = lines[0].key;

    const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart-svg', role: 'img',
      'aria-label': `${lines.map((l) => l.label).join(' and ')} over time` });
    const grad = svg('linearGradient', { id: 'wm-area', x1: 0, y1: 0, x2: 0, y2: 1 });
    grad.append(svg('stop', { offset: '0%', class: 'area-top' }), svg('stop', { offset: '100%', class: 'area-bottom' }));
    s.appendChild(svg('defs', {})).appendChild(grad);

    for (const v of ticks) {
      const y = yAt(v);
      s.appendChild(svg('line', { x1: padL, x2: W - padR, y1: y, y2: y, class: v === 0 ? 'axis' : 'grid' }));
      s.appendChild(svg('text', { x: padL - 8, y: y + 4, class: 'tick tick-y' }, fmtAxis(v)));
    }
    const every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor(plotW / 72))));
    for (let i = 0; i < n; i += every) {
      const anchor = n === 1 ? 'middle' : i === 0 ? 'start' : i === n - 1 ? 'end' : 'middle';
      s.appendChild(svg('text', { x: xAt(i), y: H - 6, class: 'tick', 'text-anchor': anchor }, fmtTick(series[i].t, model.granularity)));
    }

    // Area under the first line, then the lines with the first on top.
    const coords = (key) => series.map((p, i) => pt(xAt(i), yAt(p[key])));
    s.appendChild(svg('path', { d: `M${pt(xAt(0), yAt(0))} L${coords(first).join(' L')} L${pt(xAt(n - 1), yAt(0))} Z`, class: 'area' }));
    for (let k = lines.length - 1; k >= 0; k--) {
      s.appendChild(svg('path', { d: `M${coords(lines[k].key).join(' L')}`, class: `line line-${k}`, 'data-series': lines[k].key, 'data-points': n }));
    }
    if (n <= 31) series.forEach((p, i) => s.appendChild(svg('circle', { cx: xAt(i), cy: yAt(p[first]), r: n === 1 ? 4 : 2.5, class: 'point' })));

    // Hover: a guide line, a dot per line and an HTML tooltip.
    const guide = s.appendChild(svg('line', { y1: padT, y2: padT + plotH, class: 'guide', visibility: 'hidden' }));
    const dots = lines.map((l, k) => s.appendChild(svg('circle', { r: 4.5, class: `dot dot-${k}`, visibility: 'hidden' })));
    const hit = s.appendChild(svg('rect', { x: padL, y: padT, width: plotW, height: plotH, class: 'hit' }));
    box.appendChild(s);
    const tip = box.appendChild(el('div', 'tooltip'));
    tip.hidden = true;

    on(hit, 'pointerleave', () => {
      for (const c of [guide, ...dots]) c.setAttribute('visibility', 'hidden');
      tip.hidden = true;
    });
    on(hit, 'pointermove', (ev) => {
      const rect = s.getBoundingClientRect();
      const scale = rect.width ? W / rect.width : 1;
      const x = (ev.clientX - rect.left) * scale;
      const i = n === 1 ? 0 : Math.max(0, Math.min(n - 1, Math.round(((x - padL) / plotW) * (n - 1))));
      const p = series[i];
      const gx = xAt(i);
      attrs(guide, { x1: gx, x2: gx, visibility: 'visible' });
      lines.forEach((l, k) => attrs(dots[k], { cx: gx, cy: yAt(p[l.key]), visibility: 'visible' }));
      clear(tip);
      tip.appendChild(el('div', 'tooltip-title', fmtLong(p.t, model.granularity)));
      lines.forEach((l, k) => {
        const row = el('div', 'tooltip-row');
        row.append(el('span', `swatch swatch-${k}`), el('span', 'tooltip-label', l.label),
          el('b', '', (model.estimated.includes(l.key) ? '≈ ' : '') + fmtExact(p[l.key])));
        tip.appendChild(row);
      });
      tip.hidden = false;
      const left = gx / scale + 12; // the chart box's padding
      const place = left + 14 + tip.offsetWidth > box.clientWidth ? left - 14 - tip.offsetWidth : left + 14;
      tip.style.left = `${Math.max(0, place)}px`;
      tip.style.top = `${Math.max(0, yAt(p[first]) / scale - tip.offsetHeight - 6)}px`;
    });
  }

  function renderLegend(lines, estimated) {
    clear($('legend'));
    lines.forEach((l, i) => {
      const item = el('span', 'legend-item');
      item.append(el('span', `swatch swatch-${i}`), l.label + (estimated.includes(l.key) ? ' (est.)' : ''));
      $('legend').appendChild(item);
    });
  }

  // niceTicks: 0 and round steps up to at least max.
  function niceTicks(max) {
    if (!(max > 0)) return [0, 1, 2, 3, 4];
    const raw = max / 4;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const step = Math.max(1, ([1, 2, 2.5, 5, 10].find((f) => f * mag >= raw) || 10) * mag);
    const out = [0];
    while (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
    return out;
  }

  function svg(tag, a, text) {
    const node = attrs(document.createElementNS(SVGNS, tag), a);
    if (text != null) node.textContent = text;
    return node;
  }

  function attrs(node, a) {
    for (const [k, v] of Object.entries(a)) node.setAttribute(k, String(v));
    return node;
  }

  const pt = (x, y) => `${x.toFixed(1)},${y.toFixed(1)}`;

  // ---- Formatting ----
  const NF = safe(() => new Intl.NumberFormat(), null);
  const COMPACT = safe(() => new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 }), null);
  const REGIONS = safe(() => new Intl.DisplayNames(undefined, { type: 'region' }), null);

  const fmtExact = (n) => (NF ? NF.format(Math.round(n * 100) / 100) : String(n));
  const fmtInt = (n) => (n >= 100000 && COMPACT ? COMPACT.format(n) : fmtExact(Math.round(n)));
  const fmtAxis = (n) => (n >= 1000 && COMPACT ? COMPACT.format(n) : fmtExact(n));

  function fmtMetric(v, format) {
    if (format === 'decimal') return (Math.round(v * 100) / 100).toFixed(2);
    if (format === 'percent') return `${Math.round(v)}%`;
    if (format === 'duration') return fmtDuration(v);
    return fmtInt(v);
  }

  function fmtDuration(sec) {
    const t = Math.max(0, Math.round(sec));
    if (t < 60) return `${t}s`;
    const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60);
    return h ? `${h}h ${pad2(m)}m` : `${m}m ${pad2(t % 60)}s`;
  }

  function fmtShare(f) {
    const p = Math.max(0, f) * 100;
    if (p > 0 && p < 1) return '<1%';
    return `${p < 10 && p % 1 ? p.toFixed(1) : Math.round(p)}%`;
  }

  const dateFmt = (d, opts) => safe(() => d.toLocaleString(undefined, opts), ymd(d));

  function fmtTick(d, gran) {
    if (gran === 'hour') return `${pad2(d.getHours())}:00`;
    if (gran === 'month') return dateFmt(d, { month: 'short', year: '2-digit' });
    return dateFmt(d, { month: 'short', day: 'numeric' });
  }

  function fmtLong(d, gran) {
    if (gran === 'hour') return dateFmt(d, { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
    if (gran === 'month') return dateFmt(d, { month: 'long', year: 'numeric' });
    if (gran === 'week') return `Week of ${dateFmt(d, { month: 'short', day: 'numeric' })}`;
    return dateFmt(d, { weekday: 'short', month: 'short', day: 'numeric', year: 'numeric' });
  }

  function timeAgo(d) {
    const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
    if (s < 5) return 'just now';
    if (s < 60) return `${s}s ago`;
    return s < 3600 ? `${Math.floor(s / 60)}m ago` : `${Math.floor(s / 3600)}h ago`;
  }

  // ---- Small helpers ----
  function num(v) { const n = typeof v === 'number' ? v : parseFloat(v); return Number.isFinite(n) ? n : 0; }
  function str(v) { return v == null ? '' : String(v); }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function obj(v) { return v && typeof v === 'object' ? v : {}; }
  function pad2(n) { return String(n).padStart(2, '0'); }
  function ymd(d) { return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`; }
  function safe(fn, fallback) { try { return fn(); } catch (e) { return fallback; } }
  function stripScheme(u) { return String(u).replace(/^https?:\/\//, '').replace(/\/$/, ''); }
  function shorten(s, n) { return s.length > n ? `${s.slice(0, n - 1)}…` : s; }
  function clear(node) { if (node) node.replaceChildren(); }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = text;
    return node;
  }

  function flash(node) {
    node.classList.remove('flash');
    void node.offsetWidth; // restarts the animation
    node.classList.add('flash');
  }

  // parseTime reads a series time: a date (local midnight), an RFC 3339
  // time, or Unix seconds or milliseconds.
  function parseTime(t) {
    if (typeof t === 'number' && Number.isFinite(t)) return new Date(t < 1e12 ? t * 1000 : t);
    if (typeof t !== 'string') return null;
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(t);
    if (m) return new Date(+m[1], +m[2] - 1, +m[3]);
    const d = new Date(t);
    return Number.isNaN(d.getTime()) ? null : d;
  }

  // The address bar keeps what is shown (never the key), so a reload or a
  // bookmark comes back to the same report.
  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    if (h.has('site')) Object.assign(state, { kind: 'site', site: h.get('site') });
    if (h.get('link')) Object.assign(state, { kind: 'link', link: h.get('link') });
    if (RANGES[h.get('range')]) state.range = h.get('range');
  }

  function writeHash() {
    const h = new URLSearchParams();
    if (state.kind === 'link' && state.link) h.set('link', state.link);
    if (state.kind === 'site') h.set('site', state.site);
    h.set('range', state.range);
    safe(() => history.replaceState(null, '', `#${h}`));
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', guard(start));
  else guard(start)();
})();
