/* Waymark tracker: keeps nothing in the browser. Speaks Plausible's /api/event. */
(function (w, d) {
  'use strict';
  try {
    var loc = w.location, nav = w.navigator, hist = w.history;
    var el = d.currentScript || d.querySelector('script[data-domain]');
    var attr = function (n) { return el && el.getAttribute(n); };
    var domain = attr('data-domain') || loc.hostname;
    var api = attr('data-api') || (el && el.src ? new URL(el.src).origin : '') + '/api/event';
    var page = null;  // path of the current pageview
    var armed = false; // an engagement event is owed for this page
    var engaged = 0;  // visible milliseconds on this page
    var since = 0;    // when the page last became visible; 0 while hidden
    var depth = 0;    // deepest scroll on this page, percent

    var now = function () { return Date.now(); };
    var visible = function () { return d.visibilityState !== 'hidden'; };
    var safe = function (f) {
      return function () { try { return f.apply(this, arguments); } catch (e) {} };
    };

    var send = function (body, beacon, cb) {
      var data = JSON.stringify(body);
      if (beacon && nav.sendBeacon && nav.sendBeacon(api, data)) return cb && cb();
      var x = new XMLHttpRequest();
      x.open('POST', api, true);
      x.setRequestHeader('Content-Type', 'text/plain');
      x.onreadystatechange = function () { if (x.readyState === 4 && cb) cb(); };
      x.send(data);
    };

    var event = function (name) {
      return { n: name, u: loc.href, d: domain, r: d.referrer || null, w: w.innerWidth, t: now() };
    };

    var scrolled = safe(function () {
      var de = d.documentElement, b = d.body || de;
      var h = Math.max(de.scrollHeight, b.scrollHeight, de.offsetHeight, b.offsetHeight, de.clientHeight);
      var y = (w.pageYOffset || de.scrollTop || 0) + w.innerHeight;
      var s = h > 0 ? Math.min(100, Math.round(100 * y / h)) : 100;
      if (s > depth) depth = s;
    });

    var pageview = safe(function () {
      if (loc.pathname === page) return; // replaceState and same-page pushState
      page = loc.pathname;
      armed = true;
      engaged = 0;
      depth = 0;
      since = visible() ? now() : 0;
      // Measure after the next frame: during pushState or popstate the
      // browser still shows the previous page's scroll position.
      (w.requestAnimationFrame || setTimeout)(scrolled);
      send(event('pageview'));
    });

    // engagement reports visible time and scroll depth once per hiding.
    var engagement = safe(function () {
      if (!armed) return;
      armed = false;
      if (since) engaged += now() - since;
      since = 0;
      scrolled();
      var b = event('engagement');
      b.e = engaged;
      b.sd = depth;
      engaged = 0;
      send(b, true);
    });

    var track = safe(function (name, opts) {
      opts = opts || {};
      var b = event(name);
      if (opts.props) b.p = opts.props;
      if (opts.interactive === false) b.i = false;
      send(b, false, opts.callback);
    });

    var wrap = function (m) {
      var orig = hist[m];
      if (!orig) return;
      hist[m] = function () {
        var r = orig.apply(this, arguments);
        pageview();
        return r;
      };
    };
    wrap('pushState');
    wrap('replaceState');
    w.addEventListener('popstate', pageview);
    w.addEventListener('scroll', scrolled, { passive: true });
    w.addEventListener('pagehide', engagement);
    d.addEventListener('visibilitychange', safe(function () {
      if (!visible()) return engagement();
      since = now();
      armed = true;
    }));

    var queued = (w.waymark && w.waymark.q) || [];
    w.waymark = track;
    for (var i = 0; i < queued.length; i++) track.apply(null, queued[i]);
    pageview();
  } catch (e) {}
})(window, document);
