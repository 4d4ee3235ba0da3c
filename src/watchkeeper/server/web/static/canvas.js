// The supervision canvas: /web/canvas.json drawn as nodes and edges, with gestures.
// Touch, mouse and keyboard each reach everything: a tap, a click or Enter selects a node;
// a long press, a right-click or the panel's Actions button offers its actions; a flick,
// Close or Escape puts a panel away; two fingers, the wheel or +/- zoom; one finger, the
// mouse or the arrow keys move the view. Pointer Events carry touch and mouse alike.
// This file draws and holds the view; canvas_panels.js shows the details and the actions,
// canvas_gestures.js reads fingers, the mouse and the keys, canvas_edges.js draws the edge
// that routes a program's notices, canvas_cards.js adds the runs, the endpoint, the health
// monitor and the dials.
"use strict";

(() => {
  const SOURCE = "/web/canvas.json";
  // What canvas_cards.js adds: run cards, the endpoint, dials and the gestures on them.
  const EXTRA = window.wkCanvasExtra || {};
  const SVG = "http://www.w3.org/2000/svg";
  const ROW = 50;
  const INDENT = 30;
  const NODE_W = 210;
  const NODE_H = 38;
  const MARGIN = 14;
  const MIN_SCALE = 0.3;
  const MAX_SCALE = 3;
  const STEP = 1.25;
  const TONE = {
    running: "ok", closed: "ok", healthy: "ok",
    restarting: "warn", "half-open": "warn", degraded: "warn",
    gave_up: "bad", open: "bad", unhealthy: "bad",
    stopped: "off", live: "ok", stale: "warn", ended: "off", alive: "ok", quiet: "warn", late: "bad",
    ok: "ok", failing: "bad",
  };

  const $ = (id) => document.getElementById(id);
  // Deferred, the script runs once the page is parsed: its elements are there.
  const svg = $("sup-canvas");
  const view = $("sup-view");
  const panel = $("sup-panel");
  const sheet = $("sup-sheet");
  // The view's zoom and offset, shared with the panels and the gestures.
  const v = { scale: 1, tx: 0, ty: 0 };
  // What was read, every drawn node by its key ("child:server/notifier", "breaker:mail",
  // ...), and the selected one.
  const st = { data: { trees: [], breakers: [], health: [] }, nodes: new Map(), selected: null };
  let fitted = false;
  // Supervisors whose children are hidden (nested ones start so) or shown.
  const folded = new Set();
  const unfolded = new Set();
  // Trees pinched into one shell: their registry, supervisors, breakers and checks as a badge.
  const shelled = new Set();
  // The panels' and the gestures' functions join it at start.
  const c = {};

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function make(name, attributes = {}, parent = null) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
    if (parent) parent.append(element);
    return element;
  }

  // ---- What is drawn ------------------------------------------------------------------

  // Rows top to bottom: each tree, then under each node its guards (breakers, health
  // checks) and its children, indented one step deeper.
  function rowsOf(found) {
    const rows = [];
    const guards = new Map();
    const loose = [];
    const known = new Set();
    const walk = (children) => {
      for (const child of children || []) { known.add(child.id); walk(child.children); }
    };
    for (const tree of found.trees || []) { known.add(tree.id); walk(tree.children); }
    const guard = (item) => {
      if (item.node && known.has(item.node)) {
        if (!guards.has(item.node)) guards.set(item.node, []);
        guards.get(item.node).push(item);
      } else {
        loose.push(item);
      }
    };
    for (const breaker of found.breakers || []) guard({ type: "breaker", item: breaker, node: breaker.node });
    for (const check of found.health || []) guard({ type: "health", item: check, node: check.node });

    const place = (type, item, depth, parent) => {
      const key = `${type}:${type === "breaker" || type === "health" ? item.name : item.id}`;
      const row = { key, type, item, depth, parent, index: rows.length };
      rows.push(row);
      return row;
    };
    const descend = (id, row, children) => {
      for (const g of guards.get(id) || []) place(g.type, g.item, row.depth + 1, row);
      if (isFolded(row)) return;
      for (const child of children || []) {
        const at = place("child", child, row.depth + 1, row);
        descend(child.id, at, child.children);
      }
    };
    EXTRA.before?.(found, place);
    // Everything under a node (its guards, its children and theirs), by tone.
    const inside = (id, children, tally) => {
      for (const g of guards.get(id) || []) {
        const tone = TONE[g.type === "breaker" ? g.item.state : g.item.status] || "off";
        tally[tone] = (tally[tone] || 0) + 1;
      }
      for (const child of children || []) {
        const tone = TONE[child.state] || "off";
        tally[tone] = (tally[tone] || 0) + 1;
        inside(child.id, child.children, tally);
      }
      return tally;
    };
    for (const tree of found.trees || []) {
      const at = place("tree", tree, 0, null);
      if (shelled.has(tree.id)) at.shell = inside(tree.id, tree.children, {});
      else descend(tree.id, at, tree.children);
    }
    EXTRA.after?.(found, place);
    if (loose.length) {
      const at = place("group", { id: "loose", name: "Not attached to a node" }, 0, null);
      for (const g of loose) place(g.type, g.item, 1, at);
    }
    return rows;
  }

  // A nested supervisor (a program group) starts folded: a phone shows its groups first.
  function isFolded(row) {
    const item = row.item;
    if (row.type !== "child" || item.kind !== "supervisor") return false;
    if (folded.has(item.id)) return true;
    return !unfolded.has(item.id);
  }

  function toggleFold(key) {
    const row = st.nodes.get(key);
    if (!row || row.item.kind !== "supervisor" || row.type !== "child") return false;
    if (isFolded(row)) { folded.delete(row.item.id); unfolded.add(row.item.id); }
    else { unfolded.delete(row.item.id); folded.add(row.item.id); }
    draw();
    return true;
  }

  function stateOf(row) {
    if (EXTRA.stateOf?.(row) !== undefined) return EXTRA.stateOf(row);
    const item = row.item;
    if (row.type === "breaker") return item.state;
    if (row.type === "health") return item.status;
    return item.state || "";
  }

  function nameOf(row) {
    return row.item.name || row.item.id || "";
  }

  function kindOf(row) {
    if (EXTRA.kindOf?.(row)) return EXTRA.kindOf(row);
    if (row.type === "tree") return `tree, ${row.item.strategy || "supervisor"}`;
    if (row.type === "child" && row.item.strategy) {
      return `${row.item.kind}, ${row.item.strategy.replaceAll("_", "-")}`;
    }
    if (row.type === "child") return row.item.kind || "child";
    if (row.type === "breaker") return "circuit breaker";
    if (row.type === "health") return "health check";
    return "";
  }

  function badge(shell) {
    const total = Object.values(shell).reduce((a, b) => a + b, 0);
    const parts = ["ok", "warn", "bad", "off"].filter((tone) => shell[tone]).map((tone) => `${shell[tone]} ${tone}`);
    return `${total} inside: ${parts.join(", ") || "nothing"}`;
  }

  // A pinch on a tree closes it into a shell, a spread opens it (or C, either way).
  function setShell(key, closed) {
    const row = st.nodes.get(key);
    if (!row || row.type !== "tree" || shelled.has(row.item.id) === closed) return false;
    if (closed) shelled.add(row.item.id);
    else shelled.delete(row.item.id);
    draw();
    return true;
  }

  function subline(row) {
    const item = row.item;
    if (row.shell) return `shell · ${badge(row.shell)}`;
    if (EXTRA.subline?.(row)) return EXTRA.subline(row);
    if (row.type === "child" && item.kind === "supervisor") {
      const count = (item.children || []).length;
      const sign = isFolded(row) ? "+" : "−";
      return `${sign} ${count} children · ${item.restarts || 0} restarts`;
    }
    const state = (stateOf(row) || "").replace("_", " ");
    if (row.type === "child") {
      const restarts = `${item.restarts || 0} restart${item.restarts === 1 ? "" : "s"}`;
      return `${item.kind || "child"} · ${state} · ${restarts}`;
    }
    if (row.type === "breaker") return `breaker · ${state} · ${item.failures || 0} failures`;
    if (row.type === "health") return `health · ${state}`;
    if (row.type === "tree") return `tree · ${item.strategy || ""} · ${state}`;
    return "";
  }

  function clipped(text, most) {
    return text.length > most ? `${text.slice(0, most - 1)}…` : text;
  }

  function draw() {
    const rows = rowsOf(st.data);
    const focusedKey = document.activeElement?.closest?.(".sn")?.dataset.key;
    view.replaceChildren();
    st.nodes = new Map();
    const edges = make("g", { class: "sup-edges", "aria-hidden": "true" }, view);
    let width = 0;
    for (const row of rows) {
      const x = MARGIN + row.depth * INDENT;
      const y = MARGIN + row.index * ROW;
      row.x = x;
      row.y = y;
      width = Math.max(width, x + NODE_W + MARGIN);
      if (row.parent) {
        const px = row.parent.x + 14;
        const py = row.parent.y + NODE_H;
        const guard = row.type === "breaker" || row.type === "health";
        make("path", {
          d: `M${px} ${py} V${y + NODE_H / 2} H${x}`,
          class: `sup-edge${guard ? " guard" : ""}${row.item.state === "restarting" ? " restart" : ""}`,
        }, edges);
      }
      if (row.type === "group") {
        const label = make("text", { x, y: y + NODE_H * 0.62, class: "sup-group" }, view);
        label.textContent = nameOf(row);
        continue;
      }
      const state = stateOf(row);
      const tone = TONE[state] || "off";
      const extraClass = EXTRA.classOf?.(row) || "";
      const node = make("g", {
        class: `sn ${row.type} ${tone}${extraClass}${st.selected === row.key ? " selected" : ""}`,
        tabindex: 0,
        role: "button",
        "aria-label": `${nameOf(row)}: ${kindOf(row)}, ${(state || "unknown").replace("_", " ")}`
          + (row.type === "child" ? `, ${row.item.restarts || 0} restarts` : "")
          + (row.type === "child" && row.item.kind === "supervisor"
            ? (isFolded(row) ? ", folded" : ", unfolded") : "")
          + (row.shell ? `, closed in a shell, ${badge(row.shell)}` : ""),
        "aria-haspopup": "dialog",
        "data-key": row.key,
        "data-type": row.type,
        "data-state": state,
        "data-name": nameOf(row),
        transform: `translate(${x} ${y})`,
      }, view);
      if (row.type === "child" || row.type === "tree") node.dataset.node = row.item.id;
      if (row.type === "run") node.dataset.run = row.item.id;
      if (row.shell) {
        node.classList.add("shell");
        node.dataset.badge = badge(row.shell);
      }
      if (row.type === "breaker") {
        make("path", { class: "body", d: `M10 0 H${NODE_W - 10} L${NODE_W} ${NODE_H / 2} L${NODE_W - 10} ${NODE_H} H10 L0 ${NODE_H / 2} Z` }, node);
      } else {
        const round = row.type === "health" ? NODE_H / 2 : 6;
        make("rect", { class: "body", width: NODE_W, height: NODE_H, rx: round }, node);
      }
      make("rect", { class: "ring", x: -4, y: -4, width: NODE_W + 8, height: NODE_H + 8, rx: 9 }, node);
      if (row.type === "breaker") {
        make("path", { class: "dot", d: "M16 12 L22 19 L16 26 L10 19 Z" }, node);
      } else {
        make("circle", { class: "dot", cx: 16, cy: NODE_H / 2, r: 6 }, node);
      }
      const title = make("text", { x: 30, y: 16 }, node);
      title.textContent = clipped(nameOf(row), 26);
      const sub = make("text", { x: 30, y: 31, class: "sub" }, node);
      sub.textContent = clipped(subline(row), 34);
      st.nodes.set(row.key, row);
    }
    const height = MARGIN + rows.length * ROW;
    svg.dataset.width = String(width);
    svg.dataset.height = String(height);
    if (!fitted && rows.length) {
      fitted = true;
      fit();
    }
    if (focusedKey) nodeElement(focusedKey)?.focus({ preventScroll: true });
    if (st.selected && st.nodes.has(st.selected)) {
      if (!panel.hidden) c.describe(st.nodes.get(st.selected));
    }
  }

  function nodeElement(key) {
    return view.querySelector(`.sn[data-key="${CSS.escape(key)}"]`);
  }

  function isSupervisor(row) {
    return row && (row.type === "tree" || (row.type === "child" && row.item.kind === "supervisor"));
  }

  // ---- Zoom and pan -------------------------------------------------------------------

  function apply() {
    view.setAttribute("transform", `translate(${v.tx.toFixed(1)} ${v.ty.toFixed(1)}) scale(${v.scale.toFixed(4)})`);
    svg.dataset.scale = v.scale.toFixed(4);
    svg.dataset.tx = v.tx.toFixed(1);
    svg.dataset.ty = v.ty.toFixed(1);
    $("sup-zoom").value = `${Math.round(v.scale * 100)}%`;
  }

  const clamp = (value) => Math.min(MAX_SCALE, Math.max(MIN_SCALE, value));

  // Zoom to `next` keeping the picture's point under (x, y) (in the canvas's pixels) still.
  function zoomAt(next, x, y) {
    const to = clamp(next);
    const wx = (x - v.tx) / v.scale;
    const wy = (y - v.ty) / v.scale;
    v.scale = to;
    v.tx = x - wx * v.scale;
    v.ty = y - wy * v.scale;
    apply();
  }

  function centre() {
    const box = svg.getBoundingClientRect();
    return [box.width / 2, box.height / 2];
  }

  function panBy(dx, dy) {
    v.tx += dx;
    v.ty += dy;
    apply();
  }

  // The whole width in view (never larger than life), from the top.
  function fit() {
    const box = svg.getBoundingClientRect();
    const width = Number(svg.dataset.width || 0);
    v.scale = width > box.width && width > 0 ? clamp(box.width / width) : 1;
    v.tx = 0;
    v.ty = 0;
    apply();
  }

  // ---- Data ---------------------------------------------------------------------------

  let loading = false;
  let again = false;
  async function load() {
    if (loading) { again = true; return; }
    loading = true;
    const status = $("sup-status");
    try {
      const response = await fetch(SOURCE, {
        credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" },
      });
      if (window.wk && window.wk.refused(response)) {
        window.wk.sessionEnded();
        status.textContent = "The supervision tree is not read again: your session ended.";
        return;
      }
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      st.data = await response.json();
      draw();
      const count = st.nodes.size;
      const text = count ? "" : "This server runs no supervision tree.";
      if (status.textContent !== text) status.textContent = text;
      svg.dataset.drawn = String(Number(svg.dataset.drawn || 0) + 1);
    } catch (error) {
      status.textContent = `The supervision tree could not be read: ${error.message}. It is read again on the next change.`;
    } finally {
      loading = false;
      if (again) { again = false; load(); }
    }
  }

  function start() {
    if (!svg || !view) return;
    Object.assign(c, {
      $, svg, view, panel, sheet, v, st, EXTRA, STEP, MARGIN,
      csrf, draw, nodeElement, apply, clamp, zoomAt, centre, panBy, fit, toggleFold, setShell,
      isSupervisor, nameOf, kindOf, load,
    });
    Object.assign(c, window.wkCanvasPanels(c));
    Object.assign(c, window.wkCanvasEdges(c));
    Object.assign(c, window.wkCanvasGestures(c));
    svg.addEventListener("pointerdown", c.onDown);
    svg.addEventListener("pointermove", c.onMove);
    svg.addEventListener("pointerup", c.onUp);
    svg.addEventListener("pointercancel", c.onUp);
    svg.addEventListener("wheel", c.onWheel, { passive: false });
    svg.addEventListener("contextmenu", c.onContextMenu);
    svg.addEventListener("keydown", c.onKey);
    svg.addEventListener("focusin", (event) => {
      const node = event.target.closest?.(".sn");
      if (node) c.reveal(node);
    });
    document.addEventListener("keydown", c.onEscape, true);
    $("sup-zoom-in").addEventListener("click", () => zoomAt(v.scale * STEP, ...centre()));
    $("sup-zoom-out").addEventListener("click", () => zoomAt(v.scale / STEP, ...centre()));
    $("sup-reset").addEventListener("click", fit);
    $("sup-close").addEventListener("click", () => c.dismiss(panel));
    $("sup-sheet-close").addEventListener("click", () => c.dismiss(sheet));
    $("sup-actions").addEventListener("click", () => { if (st.selected) c.offer(st.selected); });
    $("sup-yes").addEventListener("click", c.act);
    $("sup-no").addEventListener("click", c.cancelAsk);
    c.flickable(panel);
    c.flickable(sheet);
    // The stream says the tree moved (see dashboard.js): read it again and redraw.
    document.addEventListener("wk:supervision", load);
    document.addEventListener("wk:resync", load);
    EXTRA.init?.({
      post: c.post, say: c.say, select: c.select, mayAct: c.mayAct, load, nameOf,
      nodes: () => st.nodes, data: () => st.data,
    });
    apply();
    load();
  }

  document.addEventListener("DOMContentLoaded", start);
  window.wkCanvas = { load };
})();
