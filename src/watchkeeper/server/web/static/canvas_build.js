// The supervision canvas's group builder: program chips dragged (or tapped, or pressed with
// Enter) into a new group, then Build. The programs node's details show it; what is in
// the new group outlives the redraws the stream causes.
"use strict";

(() => {
  // A finger that moves less than this is tapping the chip, not dragging it.
  const SLOP_PX = 10;
  const tray = { members: new Set(), name: "" };

  function element(tag, className, text) {
    const found = document.createElement(tag);
    if (className) found.className = className;
    if (text) found.textContent = text;
    return found;
  }

  function inside(box, x, y) {
    const at = box.getBoundingClientRect();
    return x >= at.left && x <= at.right && y >= at.top && y <= at.bottom;
  }

  // A chip follows the finger; let go over the new group, it joins it, anywhere else it
  // leaves it. A tap (or Enter, or a click) moves it across.
  function chip(name, joined, drop, redraw) {
    const button = element("button", "btn sup-chip", name);
    button.type = "button";
    button.dataset.program = name;
    button.setAttribute("aria-pressed", String(joined));
    button.title = joined ? `Take ${name} out of the new group` : `Put ${name} in the new group`;
    let start = null;
    let dragged = false;
    button.addEventListener("pointerdown", (event) => {
      // The panel's own flick must not take the chip's drag for its own.
      event.stopPropagation();
      start = { x: event.clientX, y: event.clientY, id: event.pointerId };
      dragged = false;
      button.setPointerCapture?.(event.pointerId);
    });
    button.addEventListener("pointermove", (event) => {
      if (!start || event.pointerId !== start.id) return;
      event.stopPropagation();
      const dx = event.clientX - start.x;
      const dy = event.clientY - start.y;
      if (!dragged && Math.hypot(dx, dy) < SLOP_PX) return;
      dragged = true;
      button.classList.add("dragging");
      button.style.transform = `translate(${dx}px, ${dy}px)`;
    });
    const end = (event) => {
      if (!start || event.pointerId !== start.id) return;
      event.stopPropagation();
      start = null;
      button.classList.remove("dragging");
      button.style.transform = "";
      if (!dragged || event.type !== "pointerup") return;
      const into = inside(drop, event.clientX, event.clientY);
      if (into) tray.members.add(name);
      else tray.members.delete(name);
      redraw();
    };
    button.addEventListener("pointerup", end);
    button.addEventListener("pointercancel", end);
    button.addEventListener("click", () => {
      // The click after a drag is the drag's, already done.
      if (dragged) { dragged = false; return; }
      if (tray.members.has(name)) tray.members.delete(name);
      else tray.members.add(name);
      redraw(name);
    });
    return button;
  }

  function draw(box, api, key) {
    box.querySelector(".sup-build")?.remove();
    const alone = (api.data().programs || []).filter((p) => !p.group).map((p) => p.name);
    for (const member of [...tray.members]) if (!alone.includes(member)) tray.members.delete(member);
    if (alone.length < 2 || !api.mayAct()) return;
    const wrap = element("div", "sup-build");
    wrap.append(element("p", "sup-build-title", "Build a group: drag programs into it"));
    const chips = element("div", "sup-chips");
    chips.setAttribute("role", "group");
    chips.setAttribute("aria-label", "Programs running alone");
    const drop = element("div", "sup-drop");
    drop.setAttribute("role", "group");
    drop.setAttribute("aria-label", "The new group");
    const redraw = (focus) => {
      draw(box, api, key);
      if (focus) box.querySelector(`.sup-chip[data-program="${CSS.escape(focus)}"]`)?.focus();
    };
    for (const name of alone) {
      const joined = tray.members.has(name);
      (joined ? drop : chips).append(chip(name, joined, drop, redraw));
    }
    if (!tray.members.size) drop.append(element("span", "muted", "Drop programs here"));
    const label = element("label", "sup-field", "Group name");
    const input = element("input");
    input.value = tray.name || "group-1";
    input.addEventListener("input", () => { tray.name = input.value; });
    label.append(input);
    const build = element("button", "btn", "Build");
    build.type = "button";
    build.disabled = tray.members.size < 2;
    build.addEventListener("click", async () => {
      const members = [...tray.members];
      api.say(key, `Building ${input.value}…`);
      const answer = await api.post("/web/canvas/groups", { name: input.value, programs: members });
      if (answer.ok) { tray.members.clear(); tray.name = ""; }
      api.say(key, answer.message);
      api.load();
    });
    wrap.append(chips, drop, label, build);
    box.append(wrap);
  }

  window.wkCanvasBuild = { draw };
})();
