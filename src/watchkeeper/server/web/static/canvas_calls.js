// The supervision canvas's breaker spread open: its recent calls as a strip of ticks (oldest
// to newest, green for a success, red for a failure), its totals, then the same calls as a
// list, newest first, each with its time and, for a failure, its reason. canvas_cards.js
// opens it (a spread, H, or Recent calls); the calls are the breaker's `recent` in
// /web/canvas.json, their reasons redacted by the server.
"use strict";

(() => {
  const SVGNS = "http://www.w3.org/2000/svg";
  const TICK_W = 8;
  const TICK_GAP = 3;
  const TICK_H = 20;

  const two = (n) => String(n).padStart(2, "0");
  const count = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const reasonOf = (call) => call.reason || "reason not known";

  // Times in UTC, as the server keeps them: a call's time reads the same on every screen.
  function utc(iso) {
    const at = new Date(iso);
    if (Number.isNaN(at.getTime())) return iso;
    return `${two(at.getUTCHours())}:${two(at.getUTCMinutes())}:${two(at.getUTCSeconds())} UTC`;
  }

  function element(tag, className, text) {
    const found = document.createElement(tag);
    if (className) found.className = className;
    if (text !== undefined) found.textContent = text;
    return found;
  }

  // Left to right as they happened, so the newest is where a reader's eye ends.
  function strip(calls) {
    const oldest = [...calls].reverse();
    const svg = document.createElementNS(SVGNS, "svg");
    const width = oldest.length * (TICK_W + TICK_GAP) - TICK_GAP;
    svg.setAttribute("class", "sup-strip");
    svg.setAttribute("viewBox", `0 0 ${width} ${TICK_H}`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(TICK_H));
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `The last ${count(calls.length, "call", "calls")}, oldest to newest: `
      + oldest.map((call) => (call.ok ? "success" : "failure")).join(", "));
    oldest.forEach((call, index) => {
      const tick = document.createElementNS(SVGNS, "rect");
      tick.setAttribute("x", String(index * (TICK_W + TICK_GAP)));
      tick.setAttribute("y", "0");
      tick.setAttribute("width", String(TICK_W));
      tick.setAttribute("height", String(TICK_H));
      tick.setAttribute("rx", "2");
      tick.setAttribute("class", call.ok ? "ok" : "bad");
      const title = document.createElementNS(SVGNS, "title");
      title.textContent = `${utc(call.at)}: ${call.ok ? "success" : `failure, ${reasonOf(call)}`}`;
      tick.append(title);
      svg.append(tick);
    });
    return svg;
  }

  function totals(item, calls) {
    const ok = calls.filter((call) => call.ok).length;
    const all = `In all: ${count(item.successes, "success", "successes")}, `
      + `${count(item.failures, "failure", "failures")}, ${item.rejections} rejected.`;
    if (!calls.length) return `No call through it yet. ${all}`;
    return `The last ${count(calls.length, "call", "calls")}: ${ok} succeeded, ${calls.length - ok} failed. ${all}`;
  }

  function draw(box, row) {
    box.querySelector(".sup-calls")?.remove();
    const item = row.item;
    const calls = item.recent || [];
    const wrap = element("section", "sup-calls");
    wrap.setAttribute("aria-label", `Recent calls through ${item.name}`);
    wrap.append(element("p", "sup-calls-total", totals(item, calls)));
    if (calls.length) {
      wrap.append(strip(calls));
      const list = element("ol", "sup-calls-list");
      list.setAttribute("aria-label", "Recent calls, newest first");
      for (const call of calls) {
        const line = element("li", call.ok ? "ok" : "bad");
        line.dataset.ok = String(call.ok);
        const time = element("time", "", utc(call.at));
        time.dateTime = call.at;
        line.append(time, " ", element("span", "sup-call-what", call.ok ? "success" : "failure"));
        if (!call.ok) line.append(": ", element("span", "sup-call-why", reasonOf(call)));
        list.append(line);
      }
      wrap.append(list);
    }
    box.append(wrap);
  }

  window.wkCanvasCalls = { draw };
})();
