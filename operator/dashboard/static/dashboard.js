// Spindle dashboard: live updates without reloading. A page's <main data-live="Kind,Kind">
// names the kinds it shows; on a server-sent change of one of them, the page's own <main> is
// fetched again (?fragment=main, rendered by the same server template) and swapped in.
// No framework, no build step: the server renders, this file only refreshes.
"use strict";
(function () {
  const main = document.getElementById("main");
  const status = document.getElementById("live-status");
  if (!main || !main.dataset.live || !window.EventSource) return;
  const kinds = main.dataset.live;
  let pending = null;
  let busy = false;

  function say(text) { if (status) status.textContent = text; }

  async function refresh() {
    pending = null;
    if (busy) { schedule(); return; }
    busy = true;
    try {
      const url = new URL(window.location.href);
      url.searchParams.set("fragment", "main");
      const answer = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (answer.ok) {
        const html = await answer.text();
        // Keep keyboard focus on the same control when it still exists after the swap.
        const focused = document.activeElement && document.activeElement.dataset
          ? document.activeElement.dataset.action : null;
        main.innerHTML = html;
        main.dataset.refreshed = String(Number(main.dataset.refreshed || "0") + 1);
        if (focused) {
          const again = main.querySelector('[data-action="' + focused + '"]');
          if (again) again.focus();
        }
        say("live");
      } else {
        say("live (refresh failed: HTTP " + answer.status + ")");
      }
    } catch (err) {
      say("live (refresh failed)");
    } finally {
      busy = false;
    }
  }

  function schedule() { if (!pending) pending = setTimeout(refresh, 250); }

  const source = new EventSource("/api/v1/watch?kinds=" + encodeURIComponent(kinds));
  source.addEventListener("open", function () { say("live"); });
  source.addEventListener("error", function () { say("reconnecting…"); });
  source.addEventListener("change", schedule);
  window.addEventListener("pagehide", function () { source.close(); });
})();
