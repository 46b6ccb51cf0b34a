"use strict";
(function () {
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]); } }
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function section(parent, title) { parent.appendChild(el("h3", null, title)); }
  function table(parent, headers, rows, cls) {
    var t = el("table", cls ? {"class": cls} : null), tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c) {
        if (c && typeof c === "object" && c.nodeType) { var td = el("td"); td.appendChild(c); row.appendChild(td); }
        else row.appendChild(el("td", null, c === null || c === undefined ? "-" : c));
      });
      t.appendChild(row);
    });
    parent.appendChild(t);
  }
  function diffBlock(patch) {
    var pre = el("pre", {"class": "diff", "data-testid": "diff"});
    patch.split("\n").forEach(function (line) {
      var cls = line.indexOf("+++") === 0 || line.indexOf("---") === 0 ? "" :
        line.charAt(0) === "+" ? "add" : line.charAt(0) === "-" ? "del" : line.indexOf("@@") === 0 ? "hunk" : "";
      pre.appendChild(el("span", cls ? {"class": cls} : null, line + "\n"));
    });
    return pre;
  }
  function iso(ns) { return ns === null || ns === undefined ? "-" : new Date(ns / 1e6).toISOString().replace("T", " ").replace("Z", ""); }
  function render(d) {
    var box = el("div", {"class": "attempt-detail", "data-attempt": d.attempt});
    var att = d.attestation;
    var verdict = el("p", {"data-testid": "verdict"});
    verdict.appendChild(el("b", null, "Attestation: "));
    if (att) {
      verdict.appendChild(el("span", {"class": "badge " + (att.verdict === "CLEAN" ? "ok" : att.verdict === "DIRTY" ? "bad" : "warn")}, att.verdict));
      verdict.appendChild(document.createTextNode(" isolation " + att.isolation + ", " + att.match_count + " match(es), " +
        (att.activity_count === null ? "?" : att.activity_count) + " activity entries; hash "));
      verdict.appendChild(el("code", null, att.hash));
    } else {
      verdict.appendChild(el("span", {"class": "badge warn"}, "none"));
      verdict.appendChild(document.createTextNode(" no attestation was recorded for this attempt"));
    }
    box.appendChild(verdict);
    if (att) {
      if (att.matches.length) {
        section(box, "Evidence (matches)");
        table(box, ["seq", "class", "kind", "digests", "detail"], att.matches.map(function (m) {
          return [m.seq, m["class"], m.kind, m.digest_count, m.detail]; }));
      }
      section(box, "Scope and observation");
      box.appendChild(el("pre", null, JSON.stringify({scope: att.scope, observation: att.observation}, null, 2)));
      box.appendChild(el("p", {"class": "meta"}, "check it: ledger verify " + att.hash));
    }
    if (d.prompt !== null) { section(box, "Prompt"); box.appendChild(el("pre", {"class": "prompt"}, d.prompt)); }
    section(box, "Diff" + (d.diff_sha256 ? " (sha256 " + d.diff_sha256.slice(0, 16) + "...)" : ""));
    if (d.files.length) table(box, ["file", "status", "+", "-"], d.files);
    if (d.patch) box.appendChild(diffBlock(d.patch)); else box.appendChild(el("p", {"class": "meta", "data-testid": "diff"}, "no changes recorded"));
    if (d.patch_truncated) box.appendChild(el("p", {"class": "warn"}, "the patch was truncated when it was recorded"));
    section(box, "Hidden tests and signals");
    if (d.tests.length) table(box, ["suite", "test", "outcome", "message"], d.tests.map(function (t) {
      return [t[0], t[1], el("span", {"class": t[2] === "passed" ? "ok" : t[2] === "skipped" ? "meta" : "bad"}, t[2]), t[3]]; }));
    else box.appendChild(el("p", {"class": "meta"}, "no per-test results recorded"));
    if (d.signals.length) table(box, ["signal", "passed", "detail"], d.signals.map(function (s) { return [s[0], s[1] ? "yes" : "no", s[2]]; }));
    section(box, "Transcript (" + d.transcript.length + " items)");
    if (!d.transcript.length) box.appendChild(el("p", {"class": "meta"}, "the agent's stream gave no transcript"));
    d.transcript.forEach(function (t) {
      var item = el("div", {"class": "tr-item tr-" + t[2]});
      item.appendChild(el("div", {"class": "meta"}, "seq " + t[0] + " " + t[1] + (t[3] ? " " + t[3] : "") + (t[5] ? " (error)" : "")));
      item.appendChild(el("pre", null, t[4]));
      box.appendChild(item);
    });
    section(box, "Timeline (" + d.timeline.length + " entries)");
    var t0 = d.timeline.length ? d.timeline[0][1] : 0;
    table(box, ["seq", "time (UTC)", "+s", "kind", "what"], d.timeline.map(function (e) {
      return [e[0], iso(e[1]) + (e[2] ? " (captured)" : ""), ((e[1] - t0) / 1e9).toFixed(3), e[3], e[4]]; }), "tl");
    return box;
  }
  function toggle(row) {
    var next = row.nextElementSibling;
    if (next && next.classList.contains("detail")) { next.remove(); row.setAttribute("aria-expanded", "false"); return; }
    var src = document.getElementById("a-" + row.getAttribute("data-i"));
    var d = JSON.parse(src.textContent);
    var tr = el("tr", {"class": "detail"}), td = el("td", {"colspan": String(row.children.length)});
    td.appendChild(render(d));
    tr.appendChild(td);
    row.parentNode.insertBefore(tr, row.nextSibling);
    row.setAttribute("aria-expanded", "true");
  }
  document.addEventListener("click", function (ev) {
    var row = ev.target.closest ? ev.target.closest("tr.row") : null;
    if (row) toggle(row);
  });
  document.addEventListener("keydown", function (ev) {
    var row = ev.target.closest ? ev.target.closest("tr.row") : null;
    if (row && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); toggle(row); }
  });
  var filter = document.getElementById("filter");
  if (filter) filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    document.querySelectorAll("#attempts tbody tr.row").forEach(function (r) {
      var show = !q || r.textContent.toLowerCase().indexOf(q) >= 0;
      r.style.display = show ? "" : "none";
      var n = r.nextElementSibling;
      if (n && n.classList.contains("detail")) n.style.display = show ? "" : "none";
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
