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
    const source = new EventSource(log.dataset.log);
    source.addEventListener("log", function (event) {
      const chunk = JSON.parse(event.data);
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.append(document.createTextNode(chunk.text));
      if (atBottom) {
        log.scrollTop = log.scrollHeight;
      }
      status.textContent = "try " + chunk.try + ": " + (chunk.complete ? "ended" : "streaming…") + " (task " + chunk.state + ")";
    });
    source.addEventListener("end", function () {
      source.close();
      log.dataset.ended = "1";
    });
    source.addEventListener("failed", function (event) {
      source.close();
      status.textContent = JSON.parse(event.data).message;
    });
  }
})();
