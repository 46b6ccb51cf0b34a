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
  // An absolute path (outside the worktree: worktree paths are recorded relative) shortened to
  // its last component; the full text is kept under the raw tab.
  function shortPaths(text) {
    return String(text).replace(/(^|[\s"'=(\[,])\/(?:[^\s"'\/:,)\]]+\/)+([^\s"'\/:,)\]]*)/g,
      function (m, pre, last) { return pre + "\u2026/" + last; });
  }
  function brief(v) {
    if (v === null || v === undefined) return "-";
    if (Array.isArray(v)) return v.length + " item(s)";
    if (typeof v === "object") return Object.keys(v).length + " field(s)";
    return shortPaths(v);
  }
  function badges(parent, list) {
    list.forEach(function (b) {
      parent.appendChild(document.createTextNode(" "));
      parent.appendChild(el("span", {"class": "badge " + b[1], "data-badge": b[0], "title": b[2]}, b[0]));
    });
  }
  function summaryPanel(box, d) {
    var s = d.summary || {}, bs = s.badges || [], att = d.attestation;
    var head = el("p", {"data-testid": "outcome"});
    head.appendChild(el("b", null, "Outcome: "));
    head.appendChild(el("span", {"class": s.passed ? "ok" : "bad"}, s.passed ? "passed" : "failed"));
    badges(head, bs);
    box.appendChild(head);
    bs.forEach(function (b) { box.appendChild(el("p", {"class": b[1]}, b[0] + ": " + b[2])); });
    var verdict = el("p", {"data-testid": "verdict"});
    verdict.appendChild(el("b", null, "Attestation: "));
    if (att) {
      verdict.appendChild(el("span", {"class": "badge " + (att.verdict === "CLEAN" ? "ok" : att.verdict === "DIRTY" ? "bad" : "warn")}, att.verdict));
      if (bs.length) verdict.appendChild(el("span", {"class": "warn"}, " of an attempt that did not run to its end (" +
        bs.map(function (b) { return b[0]; }).join(", ") + ")"));
      verdict.appendChild(document.createTextNode(" isolation " + att.isolation + ", " + att.match_count + " match(es), " +
        (att.activity_count === null ? "?" : att.activity_count) + " activity entries; hash "));
      verdict.appendChild(el("code", null, att.hash));
    } else {
      verdict.appendChild(el("span", {"class": "badge warn"}, "none"));
      verdict.appendChild(document.createTextNode(" no attestation was recorded for this attempt"));
    }
    box.appendChild(verdict);
    var act = s.activity || {};
    table(box, ["field", "value"], [
      ["task / agent", (s.task || "-") + " / " + (s.agent || "-")],
      ["repeat / try", (s.repeat === null || s.repeat === undefined ? "-" : s.repeat) + " / " + (s["try"] === null || s["try"] === undefined ? "-" : s["try"])],
      ["status", s.status === null || s.status === undefined ? "not finished" : s.status],
      ["failure category", s.category],
      ["agent exit code", s.exit_code],
      ["wall s", s.wall_s === null || s.wall_s === undefined ? null : Number(s.wall_s).toFixed(1)],
      ["cost usd", s.cost_usd === null || s.cost_usd === undefined ? "not recorded" : Number(s.cost_usd).toFixed(4)],
      ["tokens in / out", (s.tokens_in === null || s.tokens_in === undefined ? "-" : s.tokens_in) + " / " + (s.tokens_out === null || s.tokens_out === undefined ? "-" : s.tokens_out)],
      ["activity", Object.keys(act).sort().map(function (k) { return k + " " + act[k]; }).join(", ") || "none recorded"],
      ["diff", d.files.length + " file(s) changed"],
      ["tests", d.tests.length + " result(s), " + d.tests.filter(function (t) { return t[2] !== "passed" && t[2] !== "skipped"; }).length + " not passed"]
    ], "kv");
    if (att) {
      if (att.matches.length) {
        section(box, "Evidence (matches)");
        table(box, ["seq", "class", "kind", "digests", "detail"], att.matches.map(function (m) {
          return [m.seq, m["class"], m.kind, m.digest_count, shortPaths(m.detail === undefined ? "-" : m.detail)]; }));
      }
      section(box, "Scope and observation (counts; the full data is under raw)");
      var rows = [];
      [["scope", att.scope], ["observation", att.observation]].forEach(function (p) {
        var o = p[1] || {};
        Object.keys(o).sort().forEach(function (k) { rows.push([p[0] + "." + k, brief(o[k])]); });
      });
      table(box, ["field", "value"], rows, "kv");
      box.appendChild(el("p", {"class": "meta"}, "check it: ledger verify " + att.hash));
    }
  }
  function diffPanel(box, d) {
    box.appendChild(el("p", {"class": "meta"}, d.diff_sha256 ? "sha256 " + d.diff_sha256 : "no diff was recorded"));
    if (d.files.length) table(box, ["file", "status", "+", "-"], d.files);
    if (d.patch) box.appendChild(diffBlock(d.patch)); else box.appendChild(el("p", {"class": "meta", "data-testid": "diff"}, "no changes recorded"));
    if (d.patch_truncated) box.appendChild(el("p", {"class": "warn"}, "the patch was truncated when it was recorded"));
  }
  function testsPanel(box, d) {
    if (d.tests.length) table(box, ["suite", "test", "outcome", "message"], d.tests.map(function (t) {
      return [t[0], t[1], el("span", {"class": t[2] === "passed" ? "ok" : t[2] === "skipped" ? "meta" : "bad"}, t[2]), t[3]]; }));
    else box.appendChild(el("p", {"class": "meta"}, "no per-test results recorded"));
    if (d.signals.length) { section(box, "Signals"); table(box, ["signal", "passed", "detail"], d.signals.map(function (s) { return [s[0], s[1] ? "yes" : "no", s[2]]; })); }
  }
  function transcriptPanel(box, d) {
    if (d.prompt !== null) { section(box, "Prompt"); box.appendChild(el("pre", {"class": "prompt"}, d.prompt)); }
    section(box, d.transcript.length + " item(s)");
    if (!d.transcript.length) box.appendChild(el("p", {"class": "meta"}, "the agent's stream gave no transcript"));
    d.transcript.forEach(function (t) {
      var item = el("div", {"class": "tr-item tr-" + t[2]});
      item.appendChild(el("div", {"class": "meta"}, "seq " + t[0] + " " + t[1] + (t[3] ? " " + t[3] : "") + (t[5] ? " (error)" : "")));
      item.appendChild(el("pre", null, t[4]));
      box.appendChild(item);
    });
  }
  function timelinePanel(box, d) {
    var t0 = d.timeline.length ? d.timeline[0][1] : 0;
    box.appendChild(el("p", {"class": "meta"}, d.timeline.length + " row(s)"));
    table(box, ["seq", "time (UTC)", "+s", "kind", "what"], d.timeline.map(function (e) {
      return [e[0], iso(e[1]) + (e[2] ? " (captured)" : ""), ((e[1] - t0) / 1e9).toFixed(3), e[3], e[4]]; }), "tl");
  }
  function rawPanel(box, d) {
    box.appendChild(el("pre", {"class": "raw", "data-testid": "raw"}, JSON.stringify(d, null, 2)));
  }
  var TABS = [["summary", summaryPanel], ["diff", diffPanel], ["tests", testsPanel],
    ["transcript", transcriptPanel], ["timeline", timelinePanel], ["raw", rawPanel]];
  var seq = 0;
  function select(tab) {
    var list = tab.parentNode;
    Array.prototype.forEach.call(list.querySelectorAll("[role=tab]"), function (t) {
      var on = t === tab, panel = list.parentNode.querySelector(  // the box may not be in the page yet
        "[role=tabpanel][data-panel=\"" + t.getAttribute("data-tab") + "\"]");
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.setAttribute("tabindex", on ? "0" : "-1");
      if (on && !panel.getAttribute("data-built")) {  // raw (and any panel) built when first shown
        panel.setAttribute("data-built", "1");
        panel._build(panel);
      }
      panel.hidden = !on;
    });
  }
  function render(d) {
    var box = el("div", {"class": "attempt-detail", "data-attempt": d.attempt});
    var list = el("div", {"role": "tablist", "aria-label": "attempt " + d.attempt});
    box.appendChild(list);
    var id = "ad" + (seq++), first = null;
    TABS.forEach(function (spec, i) {
      var name = spec[0];
      var tab = el("button", {"type": "button", "role": "tab", "id": id + "-t-" + name, "data-tab": name,
        "aria-controls": id + "-p-" + name, "aria-selected": "false", "tabindex": "-1"}, name);
      var panel = el("div", {"role": "tabpanel", "id": id + "-p-" + name, "data-panel": name,
        "aria-labelledby": id + "-t-" + name, "tabindex": "0"});
      panel.hidden = true;
      panel._build = function (p) { spec[1](p, d); };
      if (name !== "raw") { panel.setAttribute("data-built", "1"); spec[1](panel, d); }
      list.appendChild(tab);
      box.appendChild(panel);
      if (i === 0) first = tab;
    });
    select(first);
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
    var tab = ev.target.closest ? ev.target.closest("[role=tab]") : null;
    if (tab) { select(tab); return; }
    var row = ev.target.closest ? ev.target.closest("tr.row") : null;
    if (row) toggle(row);
  });
  document.addEventListener("keydown", function (ev) {
    var tab = ev.target.closest ? ev.target.closest("[role=tab]") : null;
    if (tab) {  // arrows, Home and End move between the tabs; Enter and Space click the button
      var tabs = Array.prototype.slice.call(tab.parentNode.querySelectorAll("[role=tab]"));
      var i = tabs.indexOf(tab), n = tabs.length, to = null;
      if (ev.key === "ArrowRight") to = tabs[(i + 1) % n];
      else if (ev.key === "ArrowLeft") to = tabs[(i + n - 1) % n];
      else if (ev.key === "Home") to = tabs[0];
      else if (ev.key === "End") to = tabs[n - 1];
      if (to) { ev.preventDefault(); select(to); to.focus(); }
      return;
    }
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
