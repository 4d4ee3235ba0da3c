// The supervision canvas's gestures: fingers, the mouse and the keys, each to the same ends.
// A tap selects, a second tap opens a group, a long press offers actions, a flick pans on
// (or is the node's), a drag from a program draws an edge to a supervisor (canvas_edges.js),
// two fingers zoom, turn a supervisor, or spread and pinch a node.
// canvas.js calls window.wkCanvasGestures once, at start.
"use strict";

window.wkCanvasGestures = (c) => {
  const {
    svg, panel, sheet, v, st, EXTRA, STEP, MARGIN, apply, clamp, zoomAt, centre, panBy, fit,
    toggleFold, setShell, isSupervisor, select, dismiss, offer, switchStrategy,
  } = c;
  const PAN_STEP = 40;
  const LONG_PRESS_MS = 500;
  // A finger that moves less than this is still tapping (or pressing).
  const SLOP_PX = 10;
  // A flick: fast and far enough, and quick.
  const FLICK_PX = 40;
  const FLICK_PX_PER_MS = 0.5;
  const FLICK_MS = 400;
  const DOUBLE_TAP_MS = 350;
  // Two fingers turned this far on a supervisor switch its strategy.
  const ROTATE_DEG = 40;
  // Two fingers on one node this much further apart (or closer) spread (or pinch) it.
  const SPREAD = 1.5;
  // A flick's speed decays by this much each millisecond once the finger is off.
  const FRICTION = 0.995;

  let lastTap = { key: null, at: 0 };
  let tapTimer = 0;

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
      angle: Math.atan2(b.y - a.y, b.x - a.x) * 180 / Math.PI,
    };
  }

  // The finger's speed (px/ms) over its last 100 ms: what a flick leaves behind.
  function velocity(samples) {
    if (!samples.length) return [0, 0];
    const last = samples[samples.length - 1];
    const first = samples.find((s) => last.t - s.t <= 100) || last;
    const ms = Math.max(1, last.t - first.t);
    return [(last.x - first.x) / ms, (last.y - first.y) / ms];
  }

  let coasting = 0;
  // The view glides on at the flick's speed, slowing until it rests.
  function coast(vx, vy) {
    cancelAnimationFrame(coasting);
    let then = performance.now();
    svg.dataset.coasting = "true";
    const step = (now) => {
      const dt = Math.min(50, now - then);
      then = now;
      const keep = Math.pow(FRICTION, dt);
      vx *= keep;
      vy *= keep;
      panBy(vx * dt, vy * dt);
      if (Math.hypot(vx, vy) > 0.02) coasting = requestAnimationFrame(step);
      else svg.dataset.coasting = "false";
    };
    coasting = requestAnimationFrame(step);
  }

  function stopCoasting() {
    cancelAnimationFrame(coasting);
    if (svg.dataset.coasting === "true") svg.dataset.coasting = "false";
  }

  function tapped(key, at) {
    if (lastTap.key === key && at - lastTap.at <= DOUBLE_TAP_MS) {
      lastTap = { key: null, at: 0 };
      const row = st.nodes.get(key);
      // A node with nothing to open takes the second tap as a tap.
      if (EXTRA.doubleTap?.(row) || toggleFold(key)) { clearTimeout(tapTimer); return; }
    }
    lastTap = { key, at };
    const row = st.nodes.get(key);
    if (!isSupervisor(row) && !EXTRA.doubleTaps?.(row)) { select(key); return; }
    // A node a second tap opens waits to see whether one comes, so the panel this tap
    // opens is not under the finger when it does.
    clearTimeout(tapTimer);
    tapTimer = setTimeout(() => { if (lastTap.key === key) select(key); }, DOUBLE_TAP_MS);
  }

  // A node focused out of sight (Tab, a link to it) is brought into the view.
  function reveal(node) {
    const box = svg.getBoundingClientRect();
    const at = node.getBoundingClientRect();
    let dx = 0;
    let dy = 0;
    if (at.top < box.top || at.bottom > box.bottom) dy = box.top + MARGIN - at.top;
    if (at.left < box.left || at.right > box.right) dx = box.left + MARGIN - at.left;
    if (dx || dy) panBy(dx, dy);
  }

  function onDown(event) {
    if (event.pointerType === "mouse" && event.button !== 0) return;
    const [x, y] = local(event);
    pointers.set(event.pointerId, { x, y });
    svg.setPointerCapture?.(event.pointerId);
    clearTimeout(gesture?.timer);
    stopCoasting();
    if (pointers.size === 1) {
      const key = event.target.closest?.(".sn")?.dataset.key || null;
      gesture = { mode: "press", key, x, y, tx: v.tx, ty: v.ty, timer: null, samples: [{ x, y, t: event.timeStamp }] };
      if (key) {
        gesture.timer = setTimeout(() => {
          if (gesture && gesture.mode === "press") {
            gesture.mode = "held";
            offer(key);
          }
        }, LONG_PRESS_MS);
      }
    } else if (pointers.size === 2) {
      // A second finger makes it a two-finger gesture: an edge being drawn eases back.
      if (gesture?.mode === "edge") c.endEdge(null);
      const { distance, mid, angle } = pinchOf();
      const second = event.target.closest?.(".sn")?.dataset.key || null;
      const key = gesture?.key || second;
      // Both fingers on one node: a pinch or a spread may be that node's, not the view's.
      const same = Boolean(key) && key === second;
      gesture = { mode: "pinch", distance, mid, angle, turned: 0, key, same, apart: 1, scale: v.scale, tx: v.tx, ty: v.ty };
    }
  }

  function onMove(event) {
    if (!pointers.has(event.pointerId) || !gesture) return;
    const [x, y] = local(event);
    pointers.set(event.pointerId, { x, y });
    if (gesture.mode === "pinch" && pointers.size >= 2) {
      const { distance, mid, angle } = pinchOf();
      gesture.turned = ((angle - gesture.angle + 540) % 360) - 180;
      gesture.apart = distance / gesture.distance;
      const to = clamp(gesture.scale * (distance / gesture.distance));
      // The picture's point under the fingers' first midpoint follows their midpoint.
      const wx = (gesture.mid[0] - gesture.tx) / gesture.scale;
      const wy = (gesture.mid[1] - gesture.ty) / gesture.scale;
      v.scale = to;
      v.tx = mid[0] - wx * v.scale;
      v.ty = mid[1] - wy * v.scale;
      apply();
      return;
    }
    if (gesture.mode === "press" && Math.hypot(x - gesture.x, y - gesture.y) > SLOP_PX) {
      clearTimeout(gesture.timer);
      // A drag from a program draws an edge to a supervisor; the view stays where it is.
      gesture.mode = c.startEdge(gesture.key, x, y) ? "edge" : "pan";
      if (gesture.mode === "pan") svg.classList.add("panning");
    }
    if (gesture.mode === "edge") {
      c.moveEdge(x, y, event);
      return;
    }
    gesture.samples?.push({ x, y, t: event.timeStamp });
    if (gesture.mode === "pan") {
      v.tx = gesture.tx + (x - gesture.x);
      v.ty = gesture.ty + (y - gesture.y);
      apply();
    }
  }

  function onUp(event) {
    if (!pointers.has(event.pointerId)) return;
    pointers.delete(event.pointerId);
    svg.classList.remove("panning");
    if (!gesture) return;
    clearTimeout(gesture.timer);
    if (gesture.mode === "edge") {
      c.endEdge(event.type === "pointerup" ? event : null);
      gesture = null;
      return;
    }
    if (event.type === "pointerup" && gesture.mode === "press" && gesture.key) {
      tapped(gesture.key, event.timeStamp);
    }
    // Flicks are a finger's: a mouse drag ends where the mouse let go (its twins are keys),
    // however fast a busy machine delivers its last moves.
    const flickable = event.pointerType !== "mouse";
    if (event.type === "pointerup" && gesture.mode === "pan" && pointers.size === 0 && flickable) {
      const [vx, vy] = velocity(gesture.samples || []);
      const fast = Math.hypot(vx, vy) >= FLICK_PX_PER_MS;
      const row = gesture.key ? st.nodes.get(gesture.key) : null;
      if (fast && row && EXTRA.flick?.(row, vx, vy)) {
        // The flick was the node's: the view goes back to where it was.
        v.tx = gesture.tx;
        v.ty = gesture.ty;
        apply();
      } else if (fast) {
        coast(vx, vy);
      }
    }
    if (gesture.mode === "pinch" && Math.abs(gesture.turned) >= ROTATE_DEG && !gesture.rotated) {
      const row = gesture.key ? st.nodes.get(gesture.key) : null;
      if (isSupervisor(row)) {
        gesture.rotated = true;
        // A turn, not a zoom: the view stays as it was.
        v.scale = gesture.scale;
        v.tx = gesture.tx;
        v.ty = gesture.ty;
        apply();
        switchStrategy(row);
      }
    }
    if (gesture.mode === "pinch" && gesture.same && !gesture.rotated) {
      const row = st.nodes.get(gesture.key);
      const spread = gesture.apart >= SPREAD && (EXTRA.spread?.(row) || setShell(gesture.key, false));
      const pinched = !spread && gesture.apart <= 1 / SPREAD
        && (EXTRA.pinch?.(row) || setShell(gesture.key, true));
      if (spread || pinched) {
        gesture.rotated = true;
        v.scale = gesture.scale;
        v.tx = gesture.tx;
        v.ty = gesture.ty;
        apply();
      }
    }
    if (gesture.mode === "pinch" && gesture.rotated) {
      if (pointers.size === 0) gesture = null;
      return;
    }
    if (gesture.mode === "pinch" && pointers.size === 1) {
      // One finger stays: it pans on from where it is.
      const [rest] = [...pointers.values()];
      gesture = { mode: "pan", key: null, x: rest.x, y: rest.y, tx: v.tx, ty: v.ty, timer: null };
      return;
    }
    if (pointers.size === 0) gesture = null;
  }

  function onWheel(event) {
    event.preventDefault();
    const [x, y] = local(event);
    const unit = event.deltaMode === 1 ? 16 : 1;
    zoomAt(v.scale * Math.exp(-event.deltaY * unit * 0.002), x, y);
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
    if (node && EXTRA.key?.(st.nodes.get(node.dataset.key), event.key)) {
      event.preventDefault();
      return;
    }
    if (node && event.key === "n" && c.openRoutes(node.dataset.key)) {
      event.preventDefault();
      return;
    }
    if (node && event.key === "c" && st.nodes.get(node.dataset.key)?.type === "tree") {
      event.preventDefault();
      setShell(node.dataset.key, !st.nodes.get(node.dataset.key).shell);
      return;
    }
    if (node && event.key === "e" && toggleFold(node.dataset.key)) {
      event.preventDefault();
      return;
    }
    if (node && event.key === "s" && isSupervisor(st.nodes.get(node.dataset.key))) {
      event.preventDefault();
      switchStrategy(st.nodes.get(node.dataset.key));
      return;
    }
    const moves = { ArrowLeft: [PAN_STEP, 0], ArrowRight: [-PAN_STEP, 0], ArrowUp: [0, PAN_STEP], ArrowDown: [0, -PAN_STEP] };
    if (moves[event.key] && event.shiftKey) {
      // Shift glides: the keyboard's flick, coasting as a finger's does.
      event.preventDefault();
      const [dx, dy] = moves[event.key];
      coast(dx / PAN_STEP * 1.5, dy / PAN_STEP * 1.5);
      return;
    }
    if (moves[event.key]) {
      event.preventDefault();
      panBy(...moves[event.key]);
      return;
    }
    if (event.key === "+" || event.key === "=") {
      event.preventDefault();
      zoomAt(v.scale * STEP, ...centre());
    } else if (event.key === "-" || event.key === "_") {
      event.preventDefault();
      zoomAt(v.scale / STEP, ...centre());
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

  // A right-click is the mouse's long press.
  function onContextMenu(event) {
    const key = event.target.closest?.(".sn")?.dataset.key;
    if (!key) return;
    event.preventDefault();
    if (gesture) { clearTimeout(gesture.timer); gesture.mode = "held"; }
    if (sheet.hidden || sheet.dataset.key !== key) offer(key);
  }

  return { onDown, onMove, onUp, onWheel, onKey, onEscape, onContextMenu, flickable, reveal };
};
