(function () {
  "use strict";
  // With JavaScript on, the page's content is refreshed in place every
  // 30 seconds (and when its tab is shown again); without it, reload.
  var box = document.getElementById("content");
  if (!box || !window.fetch) {
    return;
  }
  // Says that this script runs (its hash is in the page's CSP), and how
  // often the content was swapped: for people, and for the browser test.
  document.documentElement.setAttribute("data-refresh", "on");
  var busy = false, swaps = 0;
  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch("/ui?fragment=1", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.redirected || r.status === 401 || r.status === 403) {
          location.reload(); // the session ended: the page asks to log in
          return null;
        }
        if (!r.ok || r.headers.get("Fleetcast-Fragment") !== "1") {
          return null;
        }
        return r.text();
      })
      .then(function (html) {
        if (html) {
          box.innerHTML = html;
          swaps += 1;
          box.setAttribute("data-refreshed", String(swaps));
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
      });
  }
  setInterval(refresh, 30000);
  document.addEventListener("visibilitychange", refresh);
})();
