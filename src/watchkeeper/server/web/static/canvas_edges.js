// The supervision canvas's drawn edges: one finger (or the mouse) drags from a program to a
// supervisor, and the program's notices go where that supervisor's go (a group's notify, or
// the ops channels for a tree's root). Let go anywhere else and the edge eases back. Its
// twin is the program's panel: **Route notices to…** (or N on the program) lists the
// supervisors. canvas.js calls window.wkCanvasEdges once, after the panels, before the
// gestures; the gestures hand it a drag that starts on a program.
"use strict";

window.wkCanvasEdges = (c) => {
  const { svg, st, v, nodeElement, nameOf } = c;
  const SVG = "http://www.w3.org/2000/svg";
  const PROGRAMS = "programs";
  // The roots that stand for the ops channels: the server's tree and the programs'.
  const OPS_ROOTS = new Set(["server", PROGRAMS]);
  const EASE_MS = 200;
  // The edge being drawn: from which program, to where the finger is, over which supervisor.
  let band = null;
  // The program whose choices are open in its panel (they outlive the stream's redraws).
  let routing = null;

  const isProgram = (row) => Boolean(row) && row.type === "child" && row.item.kind === "worker"
    && row.item.id.startsWith(`${PROGRAMS}/`) && Boolean(row.item.notify);
  const isGroup = (item) => item.kind === "supervisor" && item.id.startsWith(`${PROGRAMS}/`);
  const isTarget = (row) => Boolean(row)
    && ((row.type === "tree" && OPS_ROOTS.has(row.item.id)) || (row.type === "child" && isGroup(row.item)));

  const placeOf = (to) => (to === "ops" ? "the ops channels" : to);

  // Where the program's notices go, and who chose that.
  function notices(item) {
    const { to, set_by: by } = item.notify;
    const group = item.id.split("/").length === 3 ? item.id.split("/")[1] : null;
    const whose = by === "program" ? "its own notify" : by === "group" ? `group ${group}'s notify` : "the default";
    return `${placeOf(to)} (${whose})`;
  }

  function targetWords(target) {
    return target.type === "tree" ? "the ops channels" : `group ${nameOf(target)}`;
  }

  // Every supervisor that stands for a place: one entry for the ops channels, then each group.
  function supervisors() {
    const found = [];
    for (const tree of st.data.trees || []) {
      if (!OPS_ROOTS.has(tree.id)) continue;
      if (!found.length) found.push({ type: "tree", item: tree });
      for (const child of tree.children || []) if (isGroup(child)) found.push({ type: "child", item: child });
    }
    return found;
  }

  function choiceLabel(target) {
    if (target.type === "tree") return `The ops channels (the root: ${nameOf(target)})`;
    const to = target.item.notify;
    return `Group ${nameOf(target)}: ${to ? placeOf(to) : "the ops channels (no notify of its own)"}`;
  }

  async function routeTo(key, target) {
    const row = st.nodes.get(key);
    if (!isProgram(row) || !isTarget(target)) return;
    if (!c.mayAct()) {
      c.say(key, "Only admins route a program's notices: this session is a viewer's.");
      return;
    }
    c.say(key, `Routing ${nameOf(row)}'s notices to ${targetWords(target)}…`);
    const answer = await c.post(`/web/canvas/programs/${encodeURIComponent(row.item.name)}/notify`, { to: target.item.id });
    c.say(key, answer.message);
    c.load();
  }

  // ---- The rubber band -----------------------------------------------------------------

  // Where the edge leaves the program: its dot, in the canvas's pixels.
  function anchor(key) {
    const node = nodeElement(key);
    if (!node) return null;
    const box = svg.getBoundingClientRect();
    const at = node.getBoundingClientRect();
    return [at.left - box.left + 16 * v.scale, at.top - box.top + at.height / 2];
  }

  function drawBand(edge, x, y) {
    const from = anchor(edge.key);
    if (!from) return;
    const [x0, y0] = from;
    // Bowed out to the left, as the tree's own edges run down its left side.
    const cx = Math.min(x0, x) - 40;
    const cy = (y0 + y) / 2;
    edge.path.setAttribute("d", `M${x0.toFixed(1)} ${y0.toFixed(1)} Q${cx.toFixed(1)} ${cy.toFixed(1)} ${x.toFixed(1)} ${y.toFixed(1)}`);
  }

  function targetAt(event) {
    const key = document.elementFromPoint(event.clientX, event.clientY)?.closest?.("#sup-canvas .sn")?.dataset.key;
    const row = key ? st.nodes.get(key) : null;
    return isTarget(row) ? row : null;
  }

  function mark(key) {
    if (band.target === key) return;
    if (band.target) nodeElement(band.target)?.classList.remove("drop");
    if (key) nodeElement(key)?.classList.add("drop");
    band.target = key;
    band.path.classList.toggle("ok", Boolean(key));
  }

  // A drag from a program (an admin's) draws an edge instead of moving the view.
  function startEdge(key, x, y) {
    if (!key || !isProgram(st.nodes.get(key)) || !c.mayAct()) return false;
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("class", "sup-band");
    path.setAttribute("aria-hidden", "true");
    // Beside the view, not in it: a redraw while the finger is down keeps the edge.
    svg.append(path);
    band = { key, path, x, y, target: null };
    svg.dataset.edge = "drawing";
    moveEdge(x, y, null);
    return true;
  }

  function moveEdge(x, y, event) {
    if (!band) return;
    band.x = x;
    band.y = y;
    // A redraw makes the nodes anew: the program and the supervisor are marked again.
    nodeElement(band.key)?.classList.add("edge-from");
    mark(event ? targetAt(event)?.key || null : null);
    if (band.target) nodeElement(band.target)?.classList.add("drop");
    drawBand(band, x, y);
  }

  // Let go on a supervisor: routed. Anywhere else (or a cancelled touch): it eases back.
  function endEdge(event) {
    if (!band) return;
    const target = event ? targetAt(event) : null;
    mark(null);
    const done = band;
    band = null;
    if (!target) { ease(done); return; }
    nodeElement(done.key)?.classList.remove("edge-from");
    done.path.remove();
    svg.dataset.edge = "";
    routeTo(done.key, target);
  }

  // Back along the way it came, slowing as it nears the program, then gone.
  function ease(done) {
    svg.dataset.edge = "easing";
    const start = performance.now();
    const step = (now) => {
      const home = anchor(done.key) || [done.x, done.y];
      const t = Math.min(1, (now - start) / EASE_MS);
      const k = 1 - (1 - t) ** 3;
      drawBand(done, done.x + (home[0] - done.x) * k, done.y + (home[1] - done.y) * k);
      if (t < 1) { requestAnimationFrame(step); return; }
      done.path.remove();
      nodeElement(done.key)?.classList.remove("edge-from");
      svg.dataset.edge = "";
    };
    requestAnimationFrame(step);
  }

  // ---- The twin: the program's panel ---------------------------------------------------

  function drawChoices(row, box) {
    box.querySelector(".sup-route")?.remove();
    const wrap = document.createElement("div");
    wrap.className = "sup-route";
    wrap.setAttribute("role", "group");
    wrap.setAttribute("aria-label", `Route ${nameOf(row)}'s notices to`);
    // Where the gesture is told: a finger finds it here, as the keyboard finds N.
    const how = document.createElement("p");
    how.className = "muted sup-route-how";
    how.textContent = `Or drag ${nameOf(row)} onto a supervisor on the canvas.`;
    wrap.append(how);
    for (const target of supervisors()) {
      const choice = document.createElement("button");
      choice.type = "button";
      choice.className = "btn";
      choice.dataset.to = target.item.id;
      choice.textContent = choiceLabel(target);
      choice.addEventListener("click", () => { routing = null; routeTo(row.key, target); });
      wrap.append(choice);
    }
    box.append(wrap);
  }

  // The panel of a program says where its notices go; an admin's offers to route them. A
  // group's says where it sends its programs' notices.
  function describeRoute(row, fact, box) {
    if (routing !== row.key) routing = null;
    if (row.type === "child" && isGroup(row.item)) {
      fact("Notices", row.item.notify ? `${row.item.notify} (its own notify)` : "the ops channels (no notify of its own)");
    }
    if (!isProgram(row)) return;
    fact("Notices", notices(row.item));
    if (!c.mayAct()) return;
    const open = document.createElement("button");
    open.type = "button";
    open.className = "btn";
    open.textContent = "Route notices to…";
    open.title = "Or N on the program, or drag it onto a supervisor";
    open.setAttribute("aria-keyshortcuts", "N");
    open.setAttribute("aria-expanded", String(routing === row.key));
    open.addEventListener("click", () => {
      routing = routing === row.key ? null : row.key;
      open.setAttribute("aria-expanded", String(routing === row.key));
      if (routing) drawChoices(row, box);
      else box.querySelector(".sup-route")?.remove();
    });
    box.append(open);
    if (routing === row.key) drawChoices(row, box);
  }

  // N on a program: its panel with the supervisors to route to, the first one focused.
  function openRoutes(key) {
    const row = st.nodes.get(key);
    if (!isProgram(row)) return false;
    if (!c.mayAct()) {
      c.say(key, "Only admins route a program's notices: this session is a viewer's.");
      return true;
    }
    routing = key;
    c.select(key);
    document.querySelector("#sup-extra .sup-route button")?.focus({ preventScroll: true });
    return true;
  }

  return { startEdge, moveEdge, endEdge, describeRoute, openRoutes };
};
