// hands dashboard: refreshes the live sections every two seconds, without reloading the page.
// The server renders (and escapes) all HTML; this script only swaps it in. No inline script:
// the page's Content-Security-Policy allows scripts from this server only.
(function () {
  "use strict";
  // The login form keeps the entry a link pointed at (`/#a-…`, as a URL elicitation sends).
  var login = document.querySelector("form[action='/login']");
  if (login && /^#[A-Za-z0-9_-]{1,64}$/.test(window.location.hash)) {
    var next = document.createElement("input");
    next.type = "hidden";
    next.name = "next";
    next.value = window.location.hash;
    login.appendChild(next);
  }
  var live = document.getElementById("live");
  if (!live) { return; }
  var busy = false;
  function refresh() {
    if (busy) { return; }
    // A person in the middle of choosing a filter keeps their selection.
    var active = document.activeElement;
    if (active && active.tagName === "SELECT") { return; }
    // Nothing moves under a person about to answer: while the pointer is over the pending
    // approvals, or one of their buttons has the focus, the section is not replaced — else an
    // entry that expired above could slide another action's Allow under the click.
    var pending = document.getElementById("pending");
    if (pending && (pending.matches(":hover") || pending.contains(active))) { return; }
    busy = true;
    // `live` is relative: the page lives under its session's prefix (`/s/PREFIX/`). The CSRF
    // token goes in a header only this script can set; the server refuses /live without it.
    var token = document.querySelector("input[name='csrf']");
    fetch("live" + window.location.search, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { "X-Hands-Csrf": token ? token.value : "" }
    })
      .then(function (r) {
        if (r.status === 401) { window.location.assign("/login"); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== undefined) { live.innerHTML = html; }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  // Time left on pending approvals counts down between refreshes.
  function tick() {
    var now = Math.floor(Date.now() / 1000);
    var items = document.querySelectorAll(".left[data-expires]");
    for (var i = 0; i < items.length; i++) {
      var left = Math.max(0, parseInt(items[i].getAttribute("data-expires"), 10) - now);
      items[i].textContent = left < 60 ? left + " s" : Math.floor(left / 60) + " min " + (left % 60) + " s";
    }
  }
  window.setInterval(refresh, 2000);
  window.setInterval(tick, 1000);
})();
