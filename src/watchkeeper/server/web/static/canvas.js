// The supervision canvas: /web/supervision.json drawn as nodes and edges, with gestures.
// Touch, mouse and keyboard each reach everything: a tap, a click or Enter selects a node;
// a long press, a right-click or the panel's Actions button offers its actions; a flick,
// Close or Escape puts a panel away; two fingers, the wheel or +/- zoom; one finger, the
// mouse or the arrow keys move the view. Pointer Events carry touch and mouse alike.
"use strict";

(() => {
  const SOURCE = "/web/supervision.json";
  const SVG = "http://www.w3.org/2000/svg";
  const ROW = 50;
  const INDENT = 30;
  const NODE_W = 210;
  const NODE_H = 38;
  const MARGIN = 14;
  const MIN_SCALE = 0.3;
  const MAX_SCALE = 3;
  const STEP = 1.25;
  const PAN_STEP = 40;
  const LONG_PRESS_MS = 500;
  // A finger that moves less than this is still tapping (or pressing).
  const SLOP_PX = 10;
  // A flick: fast and far enough, and quick.
  const FLICK_PX = 40;
  const FLICK_PX_PER_MS = 0.5;
  const FLICK_MS = 400;
  const TONE = {
    running: "ok", closed: "ok", healthy: "ok",
    restarting: "warn", "half-open": "warn", degraded: "warn",
    gave_up: "bad", open: "bad", unhealthy: "bad",
    stopped: "off",
  };

  const $ = (id) => document.getElementById(id);
  let svg, view, panel, sheet;
  let data = { trees: [], breakers: [], health: [] };
  // Every drawn node by its key ("child:server/notifier", "breaker:mail", ...).
  let nodes = new Map();
  let selected = null;
  let scale = 1;
  let tx = 0;
  let ty = 0;
  let fitted = false;

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
      for (const child of children || []) {
        const at = place("child", child, row.depth + 1, row);
        descend(child.id, at, child.children);
      }
    };
    for (const tree of found.trees || []) {
      const at = place("tree", tree, 0, null);
      descend(tree.id, at, tree.children);
    }
    if (loose.length) {
      const at = place("group", { id: "loose", name: "Not attached to a node" }, 0, null);
      for (const g of loose) place(g.type, g.item, 1, at);
    }
    return rows;
  }

  function stateOf(row) {
    const item = row.item;
    if (row.type === "breaker") return item.state;
    if (row.type === "health") return item.status;
    return item.state || "";
  }

  function nameOf(row) {
    return row.item.name || row.item.id || "";
  }

  function kindOf(row) {
    if (row.type === "tree") return `tree, ${row.item.strategy || "supervisor"}`;
    if (row.type === "child") return row.item.kind || "child";
    if (row.type === "breaker") return "circuit breaker";
    if (row.type === "health") return "health check";
    return "";
  }

  function subline(row) {
    const item = row.item;
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
    const rows = rowsOf(data);
    const focusedKey = document.activeElement?.closest?.(".sn")?.dataset.key;
    view.replaceChildren();
    nodes = new Map();
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
          class: `sup-edge${guard ? " guard" : ""}`,
        }, edges);
      }
      if (row.type === "group") {
        const label = make("text", { x, y: y + NODE_H * 0.62, class: "sup-group" }, view);
        label.textContent = nameOf(row);
        continue;
      }
      const state = stateOf(row);
      const tone = TONE[state] || "off";
      const node = make("g", {
        class: `sn ${row.type} ${tone}${selected === row.key ? " selected" : ""}`,
        tabindex: 0,
        role: "button",
        "aria-label": `${nameOf(row)}: ${kindOf(row)}, ${(state || "unknown").replace("_", " ")}`
          + (row.type === "child" ? `, ${row.item.restarts || 0} restarts` : ""),
        "aria-haspopup": "dialog",
        "data-key": row.key,
        "data-type": row.type,
        "data-state": state,
        "data-name": nameOf(row),
        transform: `translate(${x} ${y})`,
      }, view);
      if (row.type === "child" || row.type === "tree") node.dataset.node = row.item.id;
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
      nodes.set(row.key, row);
    }
    const height = MARGIN + rows.length * ROW;
    svg.dataset.width = String(width);
    svg.dataset.height = String(height);
    if (!fitted && rows.length) {
      fitted = true;
      fit();
    }
    if (focusedKey) nodeElement(focusedKey)?.focus({ preventScroll: true });
    if (selected && nodes.has(selected)) {
      if (!panel.hidden) describe(nodes.get(selected));
    }
  }

  function nodeElement(key) {
    return view.querySelector(`.sn[data-key="${CSS.escape(key)}"]`);
  }

  // ---- Zoom and pan -------------------------------------------------------------------

  function apply() {
    view.setAttribute("transform", `translate(${tx.toFixed(1)} ${ty.toFixed(1)}) scale(${scale.toFixed(4)})`);
    svg.dataset.scale = scale.toFixed(4);
    svg.dataset.tx = tx.toFixed(1);
    svg.dataset.ty = ty.toFixed(1);
    $("sup-zoom").value = `${Math.round(scale * 100)}%`;
  }

  const clamp = (value) => Math.min(MAX_SCALE, Math.max(MIN_SCALE, value));

  // Zoom to `next` keeping the picture's point under (x, y) (in the canvas's pixels) still.
  function zoomAt(next, x, y) {
    const to = clamp(next);
    const wx = (x - tx) / scale;
    const wy = (y - ty) / scale;
    scale = to;
    tx = x - wx * scale;
    ty = y - wy * scale;
    apply();
  }

  function centre() {
    const box = svg.getBoundingClientRect();
    return [box.width / 2, box.height / 2];
  }

  function panBy(dx, dy) {
    tx += dx;
    ty += dy;
    apply();
  }

  // The whole width in view (never larger than life), from the top.
  function fit() {
    const box = svg.getBoundingClientRect();
    const width = Number(svg.dataset.width || 0);
    scale = width > box.width && width > 0 ? clamp(box.width / width) : 1;
    tx = 0;
    ty = 0;
    apply();
  }

  // ---- Panels -------------------------------------------------------------------------

  function fact(list, term, value) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }

  function describe(row) {
    const item = row.item;
    $("sup-panel-title").textContent = nameOf(row);
    const facts = $("sup-facts");
    facts.replaceChildren();
    fact(facts, "Kind", kindOf(row));
    if (row.type === "tree" || row.type === "child") {
      fact(facts, "Id", item.id);
      fact(facts, "State", (item.state || "unknown").replace("_", " "));
    }
    if (row.type === "tree") fact(facts, "Strategy", item.strategy || "");
    if (row.type === "child" && item.title) fact(facts, "Does", item.title);
    if (row.type === "child") {
      fact(facts, "Restarts", String(item.restarts || 0));
      fact(facts, "Last exit", item.last_exit || "none yet");
      fact(facts, "Children", String((item.children || []).length));
    }
    if (row.type === "breaker") {
      fact(facts, "State", item.state);
      fact(facts, "Failures", String(item.failures));
      fact(facts, "Successes", String(item.successes));
      fact(facts, "Rejected", String(item.rejections));
      fact(facts, "Guards", item.node || "no node");
    }
    if (row.type === "health") {
      fact(facts, "Status", item.status);
      fact(facts, "Detail", item.detail || "");
      fact(facts, "Guards", item.node || "no node");
    }
    $("sup-actions").hidden = actionsOf(row).length === 0;
    panel.dataset.key = row.key;
  }

  function select(key, { focusPanel = false } = {}) {
    const row = nodes.get(key);
    if (!row) return;
    selected = key;
    for (const element of view.querySelectorAll(".sn.selected")) element.classList.remove("selected");
    nodeElement(key)?.classList.add("selected");
    describe(row);
    $("sup-answer").textContent = "";
    show(panel);
    if (focusPanel) panel.focus({ preventScroll: true });
  }

  function show(element) {
    element.classList.remove("flung");
    element.style.transform = "";
    element.hidden = false;
  }

  // A panel goes away; focus goes back to the node it was about.
  function dismiss(element) {
    if (element.hidden) return;
    element.hidden = true;
    element.classList.remove("flung");
    element.style.transform = "";
    if (element === panel) {
      hide(sheet);
      for (const node of view.querySelectorAll(".sn.selected")) node.classList.remove("selected");
      const key = selected;
      selected = null;
      if (key) nodeElement(key)?.focus({ preventScroll: true });
    } else if (!panel.hidden) {
      $("sup-actions").focus({ preventScroll: true });
    } else if (selected) {
      nodeElement(selected)?.focus({ preventScroll: true });
    }
  }

  function hide(element) {
    element.hidden = true;
    element.classList.remove("flung");
    element.style.transform = "";
  }

  function actionsOf(row) {
    const item = row.item;
    const path = (id) => id.split("/").map(encodeURIComponent).join("/");
    if (row.type === "child") {
      const found = [{
        label: "Restart", verb: "restart",
        url: `/web/supervision/children/${path(item.id)}/restart`,
        question: `Restart ${item.name || item.id}?`,
      }];
      if (item.state !== "stopped") {
        found.push({
          label: "Stop", verb: "stop",
          url: `/web/supervision/children/${path(item.id)}/stop`,
          question: `Stop ${item.name || item.id}? It stays stopped until restarted.`,
        });
      }
      return found;
    }
    if (row.type === "breaker" && row.item.state === "closed") {
      return [{
        label: "Open breaker", verb: "open",
        url: `/web/supervision/breakers/${encodeURIComponent(item.name)}/open`,
        question: `Open the breaker ${item.name}? Calls through it are refused until it closes again.`,
      }];
    }
    return [];
  }

  function offer(key) {
    const row = nodes.get(key);
    if (!row) return;
    if (selected !== key || panel.hidden) select(key);
    const actions = actionsOf(row);
    $("sup-sheet-title").textContent = `Actions for ${nameOf(row)}`;
    const choices = $("sup-choices");
    choices.replaceChildren();
    if (!actions.length) {
      const none = document.createElement("p");
      none.className = "muted";
      none.textContent = `No action applies to this ${kindOf(row)}.`;
      choices.append(none);
    }
    for (const action of actions) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "btn";
      button.textContent = action.label;
      button.addEventListener("click", () => ask(action));
      choices.append(button);
    }
    $("sup-confirm").hidden = true;
    sheet.dataset.key = key;
    show(sheet);
    const first = choices.querySelector("button") || $("sup-sheet-close");
    first.focus({ preventScroll: true });
  }

  let pending = null;
  function ask(action) {
    pending = action;
    $("sup-question").textContent = action.question;
    $("sup-yes").textContent = `Yes, ${action.verb}`;
    $("sup-confirm").hidden = false;
    $("sup-yes").focus({ preventScroll: true });
  }

  async function act() {
    const action = pending;
    pending = null;
    if (!action) return;
    hide(sheet);
    const answer = $("sup-answer");
    answer.textContent = `${action.label}…`;
    let message;
    try {
      const response = await fetch(action.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRF-Token": csrf() },
      });
      let body = {};
      try { body = await response.json(); } catch (_e) { body = {}; }
      message = body.message || `the server answered ${response.status}`;
    } catch (error) {
      message = `no answer from the server: ${error}`;
    }
    answer.textContent = message;
    if (!panel.hidden) $("sup-actions").focus({ preventScroll: true });
    load();
  }

  // ---- Gestures -----------------------------------------------------------------------

  const pointers = new Map();
  let gesture = null;

  function local(event) {
    const box = svg.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }

  function pinchOf() {
    const [a, b] = [...pointers.values()];
    return {
      distance: Math.hypot(a.x - b.x, a.y - b.y) || 1,
      mid: [(a.x + b.x) / 2, (a.y + b.y) / 2],
    };
  }

  function onDown(event) {
    if (event.pointerType === "mouse" && event.button !== 0) return;
    const [x, y] = local(event);
    pointers.set(event.pointerId, { x, y });
    svg.setPointerCapture?.(event.pointerId);
    clearTimeout(gesture?.timer);
    if (pointers.size === 1) {
      const key = event.target.closest?.(".sn")?.dataset.key || null;
      gesture = { mode: "press", key, x, y, tx, ty, timer: null };
      if (key) {
        gesture.timer = setTimeout(() => {
          if (gesture && gesture.mode === "press") {
            gesture.mode = "held";
            offer(key);
          }
        }, LONG_PRESS_MS);
      }
    } else if (pointers.size === 2) {
      const { distance, mid } = pinchOf();
      gesture = { mode: "pinch", distance, mid, scale, tx, ty };
    }
  }

  function onMove(event) {
    if (!pointers.has(event.pointerId) || !gesture) return;
    const [x, y] = local(event);
    pointers.set(event.pointerId, { x, y });
    if (gesture.mode === "pinch" && pointers.size >= 2) {
      const { distance, mid } = pinchOf();
      const to = clamp(gesture.scale * (distance / gesture.distance));
      // The picture's point under the fingers' first midpoint follows their midpoint.
      const wx = (gesture.mid[0] - gesture.tx) / gesture.scale;
      const wy = (gesture.mid[1] - gesture.ty) / gesture.scale;
      scale = to;
      tx = mid[0] - wx * scale;
      ty = mid[1] - wy * scale;
      apply();
      return;
    }
    if (gesture.mode === "press" && Math.hypot(x - gesture.x, y - gesture.y) > SLOP_PX) {
      clearTimeout(gesture.timer);
      gesture.mode = "pan";
      svg.classList.add("panning");
    }
    if (gesture.mode === "pan") {
      tx = gesture.tx + (x - gesture.x);
      ty = gesture.ty + (y - gesture.y);
      apply();
    }
  }

  function onUp(event) {
    if (!pointers.has(event.pointerId)) return;
    pointers.delete(event.pointerId);
    svg.classList.remove("panning");
    if (!gesture) return;
    clearTimeout(gesture.timer);
    if (event.type === "pointerup" && gesture.mode === "press" && gesture.key) {
      select(gesture.key);
    }
    if (gesture.mode === "pinch" && pointers.size === 1) {
      // One finger stays: it pans on from where it is.
      const [rest] = [...pointers.values()];
      gesture = { mode: "pan", key: null, x: rest.x, y: rest.y, tx, ty, timer: null };
      return;
    }
    if (pointers.size === 0) gesture = null;
  }

  function onWheel(event) {
    event.preventDefault();
    const [x, y] = local(event);
    const unit = event.deltaMode === 1 ? 16 : 1;
    zoomAt(scale * Math.exp(-event.deltaY * unit * 0.002), x, y);
  }

  // A fast swipe on a panel puts it away, whichever way it goes.
  function flickable(element) {
    let start = null;
    element.addEventListener("pointerdown", (event) => {
      start = { x: event.clientX, y: event.clientY, t: event.timeStamp, id: event.pointerId };
    });
    element.addEventListener("pointermove", (event) => {
      if (!start || event.pointerId !== start.id || event.pointerType === "mouse") return;
      const dy = event.clientY - start.y;
      if (dy > 0) {
        element.classList.add("dragged");
        element.style.transform = `translate(-50%, ${dy}px)`;
      }
    });
    const end = (event) => {
      if (!start || event.pointerId !== start.id) return;
      const dx = event.clientX - start.x;
      const dy = event.clientY - start.y;
      const ms = Math.max(1, event.timeStamp - start.t);
      const far = Math.hypot(dx, dy);
      start = null;
      element.classList.remove("dragged");
      if (event.type === "pointerup" && far >= FLICK_PX && ms <= FLICK_MS && far / ms >= FLICK_PX_PER_MS) {
        element.classList.add("flung");
        dismiss(element);
      } else {
        element.style.transform = "";
      }
    };
    element.addEventListener("pointerup", end);
    element.addEventListener("pointercancel", end);
  }

  function onKey(event) {
    const node = event.target.closest?.(".sn");
    if (node && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      select(node.dataset.key);
      return;
    }
    if (node && (event.key === "ContextMenu" || (event.shiftKey && event.key === "F10"))) {
      event.preventDefault();
      offer(node.dataset.key);
      return;
    }
    const moves = { ArrowLeft: [PAN_STEP, 0], ArrowRight: [-PAN_STEP, 0], ArrowUp: [0, PAN_STEP], ArrowDown: [0, -PAN_STEP] };
    if (moves[event.key]) {
      event.preventDefault();
      panBy(...moves[event.key]);
      return;
    }
    if (event.key === "+" || event.key === "=") {
      event.preventDefault();
      zoomAt(scale * STEP, ...centre());
    } else if (event.key === "-" || event.key === "_") {
      event.preventDefault();
      zoomAt(scale / STEP, ...centre());
    } else if (event.key === "0") {
      event.preventDefault();
      fit();
    }
  }

  // Escape closes the sheet, then the panel (before the page's menus hear it).
  function onEscape(event) {
    if (event.key !== "Escape") return;
    if (!sheet.hidden) {
      event.stopImmediatePropagation();
      dismiss(sheet);
    } else if (!panel.hidden) {
      event.stopImmediatePropagation();
      dismiss(panel);
    }
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
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      data = await response.json();
      draw();
      const count = nodes.size;
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
    svg = $("sup-canvas");
    view = $("sup-view");
    panel = $("sup-panel");
    sheet = $("sup-sheet");
    if (!svg || !view) return;
    svg.addEventListener("pointerdown", onDown);
    svg.addEventListener("pointermove", onMove);
    svg.addEventListener("pointerup", onUp);
    svg.addEventListener("pointercancel", onUp);
    svg.addEventListener("wheel", onWheel, { passive: false });
    svg.addEventListener("contextmenu", (event) => {
      const key = event.target.closest?.(".sn")?.dataset.key;
      if (!key) return;
      event.preventDefault();
      if (gesture) { clearTimeout(gesture.timer); gesture.mode = "held"; }
      if (sheet.hidden || sheet.dataset.key !== key) offer(key);
    });
    svg.addEventListener("keydown", onKey);
    document.addEventListener("keydown", onEscape, true);
    $("sup-zoom-in").addEventListener("click", () => zoomAt(scale * STEP, ...centre()));
    $("sup-zoom-out").addEventListener("click", () => zoomAt(scale / STEP, ...centre()));
    $("sup-reset").addEventListener("click", fit);
    $("sup-close").addEventListener("click", () => dismiss(panel));
    $("sup-sheet-close").addEventListener("click", () => dismiss(sheet));
    $("sup-actions").addEventListener("click", () => { if (selected) offer(selected); });
    $("sup-yes").addEventListener("click", act);
    $("sup-no").addEventListener("click", () => {
      pending = null;
      $("sup-confirm").hidden = true;
      ($("sup-choices").querySelector("button") || $("sup-sheet-close")).focus();
    });
    flickable(panel);
    flickable(sheet);
    // The stream says the tree moved (see dashboard.js): read it again and redraw.
    document.addEventListener("wk:supervision", load);
    document.addEventListener("wk:resync", load);
    apply();
    load();
  }

  document.addEventListener("DOMContentLoaded", start);
  window.wkCanvas = { load };
})();
