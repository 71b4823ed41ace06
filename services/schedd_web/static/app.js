// The only script of the UI (the Content-Security-Policy allows no other): it keeps live pages
// up to date from the server's event streams. Fragments come rendered and escaped by the server;
// log text is only ever inserted as text.
"use strict";

(function () {
  const live = document.querySelector("#live[data-events]");
  if (live) {
    const source = new EventSource(live.dataset.events);
    const replace = function (event) {
      live.innerHTML = event.data;
      live.dataset.updates = String(Number(live.dataset.updates || "0") + 1);
    };
    source.addEventListener("run", replace);
    source.addEventListener("grid", replace);
    source.addEventListener("end", function () {
      source.close();
      live.dataset.ended = "1";
    });
  }

  const log = document.querySelector("#log[data-log]");
  if (log) {
    const status = document.querySelector("#log-status");
    const tries = document.querySelector("#tries");
    const FINAL = ["success", "failed", "skipped", "upstream_failed", "removed"];
    // One try's log; when it ends and the task will run again, the next try's tab opens and streams
    // (only on a page that shows the newest try).
    const stream = function (tryNumber) {
      const source = new EventSource(log.dataset.log + "?try=" + tryNumber);
      let last = null;
      source.addEventListener("log", function (event) {
        const chunk = JSON.parse(event.data);
        last = chunk;
        const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.append(document.createTextNode(chunk.text));
        if (atBottom) {
          log.scrollTop = log.scrollHeight;
        }
        status.textContent = "try " + chunk.try + ": " + (chunk.complete ? "ended" : "streaming…") + " (task " + chunk.state + ")";
      });
      source.addEventListener("end", function () {
        source.close();
        if (log.dataset.follow && last && FINAL.indexOf(last.state) < 0 && last.try < last.max_tries) {
          openTry(last.try + 1);
        } else {
          log.dataset.ended = "1";
        }
      });
      source.addEventListener("failed", function (event) {
        source.close();
        status.textContent = JSON.parse(event.data).message;
      });
    };
    const openTry = function (tryNumber) {
      if (tries) {
        tries.querySelectorAll("a").forEach(function (a) { a.classList.remove("current"); });
        const tab = document.createElement("a");
        tab.href = "?try=" + tryNumber;
        tab.dataset.try = String(tryNumber);
        tab.className = "current";
        tab.textContent = "try " + tryNumber;
        tries.append(" ", tab);
      }
      log.textContent = "";
      log.dataset.try = String(tryNumber);
      status.textContent = "waiting for try " + tryNumber + "…";
      stream(tryNumber);
    };
    stream(Number(log.dataset.try || "1"));
  }
})();
