// The console's live rows: a table body with data-live-url follows that server-sent event stream.
// "row" events append a server-rendered (escaped) row, keeping at most data-max-rows;
// "replace" events replace an element's content; "end" closes the stream.
(function () {
  "use strict";
  var body = document.querySelector("[data-live-url]");
  if (!body) {
    return;
  }
  var status = document.getElementById("live-status");
  var maxRows = parseInt(body.getAttribute("data-max-rows"), 10) || 500;
  var source = new EventSource(body.getAttribute("data-live-url"));

  function show(text, on) {
    if (status) {
      status.textContent = text;
      status.className = "live-status " + (on ? "on" : "off");
    }
  }

  source.onopen = function () {
    show("live", true);
  };
  source.addEventListener("row", function (event) {
    var data = JSON.parse(event.data);
    body.insertAdjacentHTML("beforeend", data.html);
    while (body.children.length > maxRows) {
      body.removeChild(body.firstElementChild);
    }
  });
  source.addEventListener("replace", function (event) {
    var data = JSON.parse(event.data);
    var target = document.getElementById(data.id);
    if (target) {
      target.innerHTML = data.html;
    }
  });
  source.addEventListener("end", function (event) {
    source.close();
    show(JSON.parse(event.data).message, false);
  });
  source.onerror = function () {
    show(source.readyState === EventSource.CLOSED ? "disconnected: reload the page" : "reconnecting…", false);
  };
})();
