// Loaded before the tracker on the test pages: records each request the
// page makes to /api/event with the page's state at that moment, in
// window.__sent, and passes it on unchanged. The tests read it to check
// when (prerendering? visible? which clock time?) the tracker sent what.
(function () {
  var sent = window.__sent = [];
  function note(url, body, via) {
    if (!/\/api\/event$/.test(String(url))) return;
    var parsed = null;
    try { parsed = JSON.parse(body); } catch (e) {}
    sent.push({
      via: via, body: parsed, at: Date.now(), path: location.pathname,
      prerendering: !!document.prerendering, visibility: document.visibilityState
    });
  }
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.__url = url;
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function (body) {
    note(this.__url, body, 'xhr');
    return send.apply(this, arguments);
  };
  var beacon = navigator.sendBeacon;
  if (beacon) {
    navigator.sendBeacon = function (url, body) {
      note(url, body, 'beacon');
      return beacon.apply(navigator, arguments);
    };
  }
  var fetch = window.fetch;
  if (fetch) {
    window.fetch = function (url, opts) {
      note(url, opts && opts.body, 'fetch');
      return fetch.apply(window, arguments);
    };
  }
})();
