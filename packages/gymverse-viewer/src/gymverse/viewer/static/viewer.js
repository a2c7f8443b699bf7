// GymVerse trajectory viewer. No dependencies; every piece of trajectory text goes into the DOM as text, never HTML.
(function () {
  "use strict";

  const $ = (sel) => document.querySelector(sel);
  const EMBED = JSON.parse($("#gv-data").textContent);
  const PAGE = 100;
  const PALETTE = ["#2f6fdb", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#5c940d",
    "#364fc7", "#a61e4d", "#087f5b", "#495057"];
  const gv = (window.gv = { timings: [], renders: 0, lastQueryMs: null });

  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const fmt = (x, d = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
  const fmtInt = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));

  // ------------------------------------------------------------------------------------------ backends
  // The server indexes the files (numpy) and pages the list; an exported page carries every episode and runs the
  // same query in the browser (localBackend), so both answer {total, offset, rows, summary}.
  function serverBackend() {
    async function get(path) {
      const res = await fetch(path, { cache: "no-store" });
      const body = await res.json();
      if (!res.ok) throw new Error(body.error || res.statusText);
      return body;
    }
    return {
      meta: () => get("api/meta"),
      query: (params) => get("api/episodes?" + new URLSearchParams(params)),
      episode: (id) => get("api/episode/" + id),
    };
  }

  function localBackend(data) {
    const eps = data.episodes;
    const texts = eps.map((e) =>
      [...e.turn_list.flatMap((t) => [t.observation, t.action]), e.final_observation].join("\u0000").toLowerCase());
    const num = (v) => (v === null || v === undefined ? -Infinity : typeof v === "boolean" ? +v : v);
    const keyOf = { error: (e) => (e.error ? 1 : 0) };
    function select(p) {
      const envs = p.env ? p.env.split(",") : null;
      const policies = p.policy ? p.policy.split(",") : null;
      const q = (p.q || "").toLowerCase();
      const flag = (v) => (v === "1" ? true : v === "0" ? false : null);
      const ok = flag(p.success), err = flag(p.error), fe = flag(p.format_error);
      const lo = p.cmin === "" || p.cmin === undefined ? null : Number(p.cmin);
      const hi = p.cmax === "" || p.cmax === undefined ? null : Number(p.cmax);
      const out = [];
      for (let i = 0; i < eps.length; i++) {
        const e = eps[i];
        if (envs && !envs.includes(e.env)) continue;
        if (policies && !policies.includes(e.policy)) continue;
        if (lo !== null && e.complexity < lo) continue;
        if (hi !== null && e.complexity > hi) continue;
        if (ok !== null && e.success !== ok) continue;
        if (err !== null && !!e.error !== err) continue;
        if (fe !== null && e.format_errors > 0 !== fe) continue;
        if (q && !texts[i].includes(q)) continue;
        out.push(e);
      }
      const key = keyOf[p.sort] || ((e) => (p.sort === "env" ? e.env : p.sort === "policy" ? e.policy || "" : num(e[p.sort])));
      const dir = p.desc === "1" ? -1 : 1;
      out.sort((a, b) => { const x = key(a), y = key(b); return x < y ? -dir : x > y ? dir : a.id - b.id; });
      return out;
    }
    function summary(sel) {
      const byC = {}, byS = {};
      const withStep = sel.filter((e) => e.step !== null);
      let lo = Infinity, hi = -Infinity;
      for (const e of withStep) { lo = Math.min(lo, e.step); hi = Math.max(hi, e.step); }
      const width = Math.max(1, Math.ceil((hi - lo + 1) / 200));
      for (const e of sel) {
        const c = (byC[e.env] = byC[e.env] || {});
        const cell = (c[e.complexity] = c[e.complexity] || [e.complexity, 0, 0]);
        cell[1] += 1; cell[2] += e.success ? 1 : 0;
      }
      for (const e of withStep) {
        const b = lo + Math.floor((e.step - lo) / width) * width;
        const s = (byS[e.env] = byS[e.env] || {});
        const cell = (s[b] = s[b] || [b, 0, 0]);
        cell[1] += e.complexity; cell[2] += 1;
      }
      const sbc = {}, cbs = {};
      for (const env of Object.keys(byC).sort())
        sbc[env] = Object.values(byC[env]).sort((a, b) => a[0] - b[0]).map(([c, n, w]) => [c, n, w / n]);
      for (const env of Object.keys(byS).sort())
        cbs[env] = Object.values(byS[env]).sort((a, b) => a[0] - b[0]).map(([s, tot, n]) => [s, tot / n, n]);
      const rets = sel.map((e) => e.return).filter(Number.isFinite);
      const n = sel.length;
      const byP = {};
      for (const e of sel) {
        const c = (byP[e.policy || "(unrecorded)"] = byP[e.policy || "(unrecorded)"] || [0, 0]);
        c[0] += 1; c[1] += e.success ? 1 : 0;
      }
      const sbp = {};
      for (const k of Object.keys(byP).sort()) sbp[k] = [byP[k][0], byP[k][1] / byP[k][0]];
      return {
        episodes: n,
        success_rate: n ? sel.filter((e) => e.success).length / n : null,
        success_by_policy: sbp,
        errors: sel.filter((e) => e.error).length,
        format_error_turns: sel.reduce((s, e) => s + e.format_errors, 0),
        mean_return: rets.length ? rets.reduce((a, b) => a + b, 0) / rets.length : null,
        success_by_complexity: sbc,
        complexity_by_step: cbs,
        return_histogram: histogram(rets, 30),
      };
    }
    return {
      meta: async () => data.meta,
      query: async (p) => {
        const sel = select(p);
        const off = Number(p.offset || 0), lim = Number(p.limit || PAGE);
        const rows = sel.slice(off, off + lim).map(({ turn_list, final_observation, metrics, ...row }) => row);
        return { total: sel.length, offset: off, rows, summary: p.summary === "0" ? undefined : summary(sel) };
      },
      episode: async (id) => eps[id],
    };
  }

  // numpy.histogram's bins: equal widths over [min, max] (±0.5 when all values are equal), last bin closed.
  function histogram(values, bins) {
    if (!values.length) return { edges: [], counts: [] };
    let lo = values[0], hi = lo;
    for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    const edges = Array.from({ length: bins + 1 }, (_, i) => lo + ((hi - lo) * i) / bins);
    const counts = new Array(bins).fill(0);
    for (const v of values) counts[Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins))] += 1;
    return { edges, counts };
  }

  const backend = EMBED ? localBackend(EMBED) : serverBackend();

  // ---------------------------------------------------------------------------------------------- state
  const state = { env: "", policy: "", cmin: "", cmax: "", success: "any", error: "any", format_error: "any", q: "",
    sort: "id", desc: "0", offset: 0, episode: null };
  let meta = null;
  let seq = 0;
  const colors = {};

  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    for (const k of Object.keys(state)) if (h.has(k)) state[k] = h.get(k);
    state.offset = Number(state.offset) || 0;
  }
  function writeHash() {
    const h = new URLSearchParams();
    for (const [k, v] of Object.entries(state))
      if (v !== null && v !== "" && !(k in { success: 1, error: 1, format_error: 1 } && v === "any")
        && !(k === "sort" && v === "id") && !(k === "desc" && v === "0") && !(k === "offset" && !v)) h.set(k, v);
    history.replaceState(null, "", "#" + h.toString());
  }
  function params(withSummary) {
    return { env: state.env, policy: state.policy, cmin: state.cmin, cmax: state.cmax, success: state.success, error: state.error,
      format_error: state.format_error, q: state.q, sort: state.sort, desc: state.desc, offset: state.offset,
      limit: PAGE, summary: withSummary ? "1" : "0" };
  }

  // ----------------------------------------------------------------------------------------------- list
  async function refresh(withSummary = true, kind = "filter") {
    const my = ++seq;
    const t0 = performance.now();
    document.body.dataset.state = "loading";
    let res;
    try {
      res = await backend.query(params(withSummary));
    } catch (err) {
      if (my === seq) showError(err);
      return;
    }
    if (my !== seq) return; // a newer request is on its way
    renderRows(res);
    if (res.summary) renderSummary(res.summary);
    const ms = performance.now() - t0;
    gv.lastQueryMs = ms;
    gv.timings.push({ kind, ms, total: res.total, server_ms: res.server_ms ?? null });
    gv.renders += 1;
    $("#timing").textContent = `${fmtInt(res.total)} episodes · ${ms.toFixed(0)} ms`;
    document.body.dataset.state = "ready";
    writeHash();
  }

  function showError(err) {
    const box = $("#problems");
    box.hidden = false;
    box.textContent = "Error: " + err.message;
    document.body.dataset.state = "error";
  }

  function cell(value, cls) { return el("td", { class: cls }, value); }
  function renderRows(res) {
    const body = $("#rows");
    const frag = document.createDocumentFragment();
    for (const r of res.rows) {
      const tr = el("tr", { class: "ep-row" + (String(r.id) === String(state.episode) ? " open" : ""),
        "data-id": r.id, onclick: () => openEpisode(r.id) },
        cell(r.id, "num"), cell(r.env), cell(r.policy ?? "–", "policy"), cell(r.seed ?? "–", "num"), cell(r.complexity, "num"),
        cell(r.turns, "num"), cell(fmt(r.return), "num"),
        el("td", { class: r.success ? "yes" : "no" }, r.success ? "✓" : "✗"),
        cell(r.format_errors || "", "num"), cell(r.step ?? "", "num"),
        el("td", { class: "err", title: r.error || "" }, r.error || ""));
      frag.append(tr);
    }
    body.replaceChildren(frag);
    const end = Math.min(res.total, res.offset + res.rows.length);
    $("#range").textContent = res.total ? `${fmtInt(res.offset + 1)}–${fmtInt(end)} of ${fmtInt(res.total)}` : "no episodes match";
    $("#range").dataset.total = res.total;
    $("#prev").disabled = res.offset <= 0;
    $("#next").disabled = end >= res.total;
    for (const th of document.querySelectorAll("#episodes th")) {
      th.classList.toggle("sorted", th.dataset.sort === state.sort);
      th.classList.toggle("desc", th.dataset.sort === state.sort && state.desc === "1");
    }
  }

  // With several policies one headline rate mixes oracle and random play: show one rate per policy instead.
  function successLines(s) {
    const pct = (x) => (x === null ? "–" : (100 * x).toFixed(1) + "%");
    const byP = Object.entries(s.success_by_policy || {});
    if (byP.length <= 1) return [el("div", {}, "success ", el("b", {}, pct(s.success_rate)))];
    return byP.map(([p, [n, rate]]) => el("div", { class: "policy-success", "data-policy": p },
      "success ", el("i", {}, p), " ", el("b", {}, pct(rate)), el("span", { class: "dim" }, ` (${fmtInt(n)})`)));
  }
  function renderStats(s) {
    const box = $("#stats");
    box.replaceChildren(
      el("div", {}, el("b", {}, fmtInt(s.episodes)), " episodes"),
      ...successLines(s),
      el("div", {}, "mean return ", el("b", {}, fmt(s.mean_return, 3))),
      el("div", {}, "episodes with error ", el("b", {}, fmtInt(s.errors))),
      el("div", {}, "format-error turns ", el("b", {}, fmtInt(s.format_error_turns))));
  }

  // --------------------------------------------------------------------------------------------- charts
  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...kids) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    for (const kid of kids) node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return node;
  }
  const W = 360, H = 170, M = { l: 34, r: 8, t: 8, b: 28 };
  function ticks(lo, hi, n, integers) {
    if (hi === lo) return [lo];
    const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    const err = (hi - lo) / n / step;
    let s = step * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
    if (integers) s = Math.max(1, Math.round(s));
    const out = [];
    for (let v = Math.ceil(lo / s) * s; v <= hi + 1e-9; v += s) out.push(+v.toFixed(10));
    return out;
  }
  function frame(xlo, xhi, ylo, yhi, xlabel, integers) {
    const sx = (x) => M.l + ((x - xlo) / (xhi - xlo || 1)) * (W - M.l - M.r);
    const sy = (y) => H - M.b - ((y - ylo) / (yhi - ylo || 1)) * (H - M.t - M.b);
    const g = svg("g", {});
    for (const y of ticks(ylo, yhi, 4)) {
      g.append(svg("line", { x1: M.l, x2: W - M.r, y1: sy(y), y2: sy(y), stroke: "#e6e8eb" }));
      g.append(svg("text", { x: M.l - 4, y: sy(y) + 3, "text-anchor": "end" }, +y.toFixed(2)));
    }
    for (const x of ticks(xlo, xhi, 6, integers)) g.append(svg("text", { x: sx(x), y: H - M.b + 12, "text-anchor": "middle" }, +x.toFixed(3)));
    g.append(svg("text", { x: W - M.r, y: H - 2, "text-anchor": "end", "font-style": "italic" }, xlabel));
    return { g, sx, sy };
  }
  function colorOf(env) { return colors[env] || "#888"; }
  function legend(names) {
    return el("div", { class: "legend" }, ...names.map((n) =>
      el("span", { title: "show only " + n, onclick: () => setFilter("env", n) }, el("i", { style: `background:${colorOf(n)}` }), n)));
  }
  function lineChart(target, series, ylo, yhi, xlabel, tip) {
    const names = Object.keys(series);
    const box = $(target);
    if (!names.length) { box.replaceChildren(el("div", { class: "empty" }, tip.empty)); return; }
    const xs = names.flatMap((n) => series[n].map((p) => p[0]));
    let xlo = Math.min(...xs), xhi = Math.max(...xs);
    if (xlo === xhi) { xlo -= 1; xhi += 1; }
    const { g, sx, sy } = frame(xlo, xhi, ylo, yhi, xlabel, xs.every(Number.isInteger));
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" }, g);
    for (const n of names) {
      const pts = series[n];
      root.append(svg("polyline", { points: pts.map((p) => `${sx(p[0])},${sy(tip.y(p))}`).join(" "), fill: "none",
        stroke: colorOf(n), "stroke-width": 1.6 }));
      for (const p of pts.length <= 60 ? pts : [])
        root.append(svg("circle", { cx: sx(p[0]), cy: sy(tip.y(p)), r: 2.4, fill: colorOf(n) }, svg("title", {}, tip.text(n, p))));
    }
    box.replaceChildren(root, legend(names));
  }
  function barChart(target, hist) {
    const box = $(target);
    if (!hist.counts.length) { box.replaceChildren(el("div", { class: "empty" }, "no episodes")); return; }
    const e = hist.edges, c = hist.counts;
    const { g, sx, sy } = frame(e[0], e[e.length - 1], 0, Math.max(...c), "return");
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" }, g);
    c.forEach((n, i) => {
      const x0 = sx(e[i]), x1 = sx(e[i + 1]);
      root.append(svg("rect", { x: x0 + 0.5, y: sy(n), width: Math.max(0.5, x1 - x0 - 1), height: sy(0) - sy(n),
        fill: "#2f6fdb" }, svg("title", {}, `[${fmt(e[i], 3)}, ${fmt(e[i + 1], 3)}): ${fmtInt(n)} episodes`)));
    });
    box.replaceChildren(root);
  }
  function renderSummary(s) {
    renderStats(s);
    lineChart("#chart-success", s.success_by_complexity, 0, 1, "complexity",
      { y: (p) => p[2], text: (n, p) => `${n} @ ${p[0]}: ${(100 * p[2]).toFixed(1)}% of ${p[1]}`, empty: "no episodes" });
    const sb = s.complexity_by_step;
    const cs = Object.values(sb).flatMap((pts) => pts.map((p) => p[1]));
    lineChart("#chart-steps", sb, cs.length ? Math.min(1, ...cs) : 1, cs.length ? Math.max(10, ...cs) : 10, "step",
      { y: (p) => p[1], text: (n, p) => `${n} @ step ${p[0]}: mean complexity ${fmt(p[1])} (${p[2]} episodes)`,
        empty: "no training step in these trajectories (metrics.step)" });
    barChart("#chart-returns", s.return_histogram);
  }

  // -------------------------------------------------------------------------------------------- episode
  async function openEpisode(id) {
    state.episode = String(id);
    for (const tr of document.querySelectorAll("tr.ep-row")) tr.classList.toggle("open", tr.dataset.id === String(id));
    let ep;
    try { ep = await backend.episode(id); } catch (err) { showError(err); return; }
    if (state.episode !== String(id)) return;
    renderEpisode(ep);
    writeHash();
  }
  function closeEpisode() { state.episode = null; $("#detail").hidden = true; writeHash(); }

  function actionNode(t) {
    const pre = el("pre", { class: "action" });
    if (t.move) pre.append(t.move.before, el("mark", { class: "move", title: "parsed move" }, t.move.move), t.move.after);
    else pre.append(t.action);
    return pre;
  }
  function signed(x) { return x === null ? null : el("span", { class: x > 0 ? "pos" : x < 0 ? "neg" : "" }, fmt(x, 3)); }
  function renderEpisode(ep) {
    $("#detail-title").textContent = `#${ep.id} · ${ep.env}` + (ep.policy ? ` · ${ep.policy}` : "");
    const facts = el("div", { class: "facts" },
      ep.policy ? el("span", { id: "detail-policy" }, "policy ", el("b", {}, ep.policy)) : null,
      el("span", {}, "seed ", el("b", {}, ep.seed ?? "–")), el("span", {}, "complexity ", el("b", {}, ep.complexity)),
      el("span", {}, "turns ", el("b", { id: "detail-turns" }, ep.turns)), el("span", {}, "return ", el("b", {}, fmt(ep.return, 3))),
      el("span", { class: ep.success ? "yes" : "no" }, ep.success ? "success" : "no success"),
      ep.truncated ? el("span", { class: "dim" }, "truncated") : null,
      ep.step !== null ? el("span", {}, "step ", el("b", {}, ep.step)) : null, el("span", { class: "dim" }, ep.source));
    const kids = [facts];
    if (ep.error) kids.push(el("div", { class: "episode-error" }, "error: " + ep.error));
    for (const t of ep.turn_list) {
      kids.push(el("div", { class: "turn" + (t.format_error ? " format-error" : ""), "data-turn": t.turn },
        el("div", { class: "turn-head" }, el("b", {}, `Turn ${t.turn}`),
          el("span", {}, "reward ", signed(t.reward)),
          t.ret !== null ? el("span", { title: "discounted return G_t" }, "G ", signed(t.ret)) : null,
          t.advantage !== null ? el("span", { class: "advantage", title: "PERPO advantage" }, "advantage ", signed(t.advantage)) : null,
          t.format_error ? el("span", { class: "format-error-badge" }, "format error") : null),
        el("div", { class: "lbl" }, "observation"), el("pre", { class: "obs" }, t.observation),
        el("div", { class: "lbl" }, "action"), actionNode(t),
        t.error_message ? el("div", { class: "error-message" }, t.error_message) : null,
        el("details", {}, el("summary", {}, "info"), el("pre", {}, JSON.stringify(t.info, null, 1)))));
    }
    kids.push(el("div", { class: "lbl" }, "final observation"), el("pre", { class: "obs final" }, ep.final_observation));
    if (Object.keys(ep.metrics || {}).length)
      kids.push(el("details", {}, el("summary", {}, "metrics"), el("pre", {}, JSON.stringify(ep.metrics, null, 1))));
    $("#detail-body").replaceChildren(...kids);
    $("#detail-body").scrollTop = 0;
    $("#detail").hidden = false;
  }

  // ------------------------------------------------------------------------------------------- controls
  const controls = { "#f-env": "env", "#f-policy": "policy", "#f-cmin": "cmin", "#f-cmax": "cmax", "#f-success": "success",
    "#f-error": "error", "#f-format": "format_error", "#f-text": "q" };
  function setFilter(key, value) {
    state[key] = value;
    state.offset = 0;
    const sel = Object.keys(controls).find((s) => controls[s] === key);
    if (sel && $(sel).value !== value) $(sel).value = value;
    refresh(true, key === "q" ? "text" : "filter");
  }
  function wire() {
    let timer = null;
    for (const [sel, key] of Object.entries(controls)) {
      const node = $(sel);
      node.value = state[key];
      if (key === "q") node.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => setFilter("q", node.value), 150); });
      else node.addEventListener("change", () => setFilter(key, node.value));
      if (key === "cmin" || key === "cmax") node.addEventListener("input", () => setFilter(key, node.value));
    }
    $("#f-text").addEventListener("keydown", (ev) => { if (ev.key === "Enter") { clearTimeout(timer); setFilter("q", ev.target.value); } });
    $("#f-reset").addEventListener("click", () => {
      Object.assign(state, { env: "", policy: "", cmin: "", cmax: "", success: "any", error: "any", format_error: "any", q: "", offset: 0 });
      for (const [sel, key] of Object.entries(controls)) $(sel).value = state[key];
      refresh(true, "filter");
    });
    for (const th of document.querySelectorAll("#episodes th")) th.addEventListener("click", () => {
      state.desc = state.sort === th.dataset.sort && state.desc === "0" ? "1" : "0";
      state.sort = th.dataset.sort;
      state.offset = 0;
      refresh(false, "sort");
    });
    $("#prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(false, "page"); });
    $("#next").addEventListener("click", () => { state.offset += PAGE; refresh(false, "page"); });
    $("#detail-close").addEventListener("click", closeEpisode);
    document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeEpisode(); });
  }

  async function start() {
    readHash();
    try { meta = await backend.meta(); } catch (err) { showError(err); return; }
    meta.envs.forEach((e, i) => { colors[e] = PALETTE[i % PALETTE.length]; });
    for (const e of meta.envs) $("#f-env").append(el("option", { value: e }, e));
    for (const p of meta.policies || []) $("#f-policy").append(el("option", { value: p }, p));
    $("#f-policy").closest("label").hidden = !(meta.policies || []).length;
    $("#sources").textContent = `${fmtInt(meta.episodes)} episodes from ${meta.files.length} file(s): ${meta.files.join(", ")}`;
    $("#mode").textContent = EMBED ? "exported page" : "";
    const notes = [...meta.problems, ...meta.notes];
    if (meta.n_problems > meta.problems.length) notes.push(`… and ${meta.n_problems - meta.problems.length} more skipped lines`);
    if (notes.length) { $("#problems").hidden = false; $("#problems").textContent = notes.join("\n"); }
    wire();
    await refresh(true, "load");
    if (state.episode !== null) openEpisode(state.episode);
    gv.readyAt = performance.now();
  }
  start();
})();
