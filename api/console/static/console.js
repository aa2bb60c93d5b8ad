/* tzpush console: the only script, served from the package (no CDN). Part of tzpush (MIT).
   Every page works without it; it only
   - loads the parts marked data-load="URL" after the page (the health checks take seconds),
   - refreshes the parts marked data-refresh="URL" every 1.5 s until the part says
     data-done="yes" (a replay being watched),
   - ticks every checkbox of a form from a data-select-all="NAME" box,
   - submits a <select data-autosubmit> when it changes.
   A fetch that lands on the login page (the session ended) reloads the page, which then shows
   the login form. */
(function () {
  "use strict";

  function fetchPart(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (res.redirected && res.url.indexOf("/console/login") !== -1) {
          window.location.reload();
          throw new Error("session ended");
        }
        if (!res.ok) { throw new Error("HTTP " + res.status); }
        return res.text();
      });
  }

  function failed(el, err) {
    el.setAttribute("aria-busy", "false");
    var p = document.createElement("p");
    p.className = "error";
    p.textContent = "Could not load this part (" + err.message + "). Reload the page to try again.";
    el.replaceChildren(p);
  }

  document.querySelectorAll("[data-load]").forEach(function (el) {
    el.setAttribute("aria-busy", "true");
    var note = document.createElement("p");
    note.className = "hint";
    note.textContent = "Checking\u2026";
    el.appendChild(note);
    fetchPart(el.getAttribute("data-load")).then(function (html) {
      el.innerHTML = html;
      el.setAttribute("aria-busy", "false");
    }).catch(function (err) { if (err.message !== "session ended") { failed(el, err); } });
  });

  document.querySelectorAll("[data-refresh]").forEach(function (el) {
    var url = el.getAttribute("data-refresh");
    function done() { return !!el.querySelector("[data-done='yes']"); }
    function tick() {
      if (done()) { return; }
      fetchPart(url).then(function (html) {
        el.innerHTML = html;
        if (!done()) { window.setTimeout(tick, 1500); }
      }).catch(function (err) {
        if (err.message !== "session ended") { window.setTimeout(tick, 5000); }
      });
    }
    window.setTimeout(tick, 1000);
  });

  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    var name = box.getAttribute("data-select-all");
    box.addEventListener("change", function () {
      var form = box.form || box.closest("form");
      if (!form) { return; }
      form.querySelectorAll("input[type=checkbox][name='" + name + "']").forEach(function (c) {
        c.checked = box.checked;
      });
    });
  });

  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { if (sel.form) { sel.form.submit(); } });
  });
})();
