// A task's page: its output follows the task's stream while it runs, and the page says when
// the task ended. The stream is read through fetch (as dashboard.js reads its own): it
// reconnects by itself, from the last event's id, with backoff when refused or lost.
"use strict";
(() => {
  const RETRY_FIRST_MS = 1000;
  const RETRY_MOST_MS = 30000;

  function follow(pre) {
    const state = document.getElementById("task-state");
    const badge = document.getElementById("task-status");
    const fact = document.getElementById("task-status-fact");
    const empty = document.getElementById("task-no-output");
    let lastId = "";
    let retryMs = RETRY_FIRST_MS;
    let failures = 0;
    let done = false;
    let controller = null;

    const atEnd = () => pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    function show(text, replace) {
      const following = atEnd();
      if (replace) pre.textContent = "";
      // Text nodes only: the output is the task's, never markup.
      pre.append(document.createTextNode(text));
      if (empty && pre.textContent) empty.hidden = true;
      if (following) pre.scrollTop = pre.scrollHeight;
    }
    function ended(status) {
      done = true;
      if (controller) controller.abort();
      if (empty && !pre.textContent && status !== "gone") empty.textContent = "The task printed nothing.";
      if (state) state.textContent = status === "gone"
        ? "the task is gone: it was deleted"
        : `the task ended: ${status}`;
      if (badge && status !== "gone") {
        badge.textContent = status;
        badge.className = `badge badge-${status}`;
      }
      // The facts above say the same, not "running" until a reload.
      if (fact && status !== "gone" && !fact.textContent.startsWith(status)) fact.textContent = status;
    }
    const handlers = {
      output: (data) => show(data, false),
      reset: (data) => show(data, true),
      end: ended,
    };

    function dispatch(type, lines) {
      const handler = handlers[type];
      if (handler && lines.length) handler(lines.join("\n"));
    }

    async function read(body) {
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let type = "";
      let lines = [];
      for (;;) {
        const { value, done: over } = await reader.read();
        if (over || done) return;
        buffer += value;
        const parts = buffer.split("\n");
        buffer = parts.pop();
        for (const raw of parts) {
          const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
          if (line === "") { dispatch(type, lines); type = ""; lines = []; continue; }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let text = colon < 0 ? "" : line.slice(colon + 1);
          if (text.startsWith(" ")) text = text.slice(1);
          if (field === "event") type = text;
          else if (field === "data") lines.push(text);
          else if (field === "id") lastId = text;
          else if (field === "retry" && /^\d+$/.test(text)) retryMs = Number(text);
          if (done) return;
        }
      }
    }

    function again() {
      if (done) return;
      failures += 1;
      if (state) state.textContent = "paused, reconnecting…";
      const backoff = Math.min(RETRY_MOST_MS, RETRY_FIRST_MS * 2 ** (failures - 1));
      setTimeout(connect, backoff / 2 + (Math.random() * backoff) / 2);
    }

    async function connect() {
      if (done) return;
      controller = new AbortController();
      const headers = { Accept: "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      let response;
      try {
        response = await fetch(pre.dataset.taskFollow, {
          headers, credentials: "same-origin", cache: "no-store", signal: controller.signal,
        });
      } catch (_error) {
        again();
        return;
      }
      const type = response.headers.get("content-type") || "";
      const wk = window.wk;
      if ((wk && wk.refused(response)) || (response.ok && !type.startsWith("text/event-stream"))) {
        done = true;  // the session ended: asking again will not mend it
        response.body?.cancel();
        if (state) state.textContent = "not following: your session ended; reload to log in";
        if (wk) wk.sessionEnded();
        return;
      }
      if (!response.ok) {
        response.body?.cancel();
        again();
        return;
      }
      if (failures && state) state.textContent = "following live";
      failures = 0;
      try {
        await read(response.body);
      } catch (_error) {
        again();
        return;
      }
      if (!done) setTimeout(connect, retryMs);
    }

    pre.scrollTop = pre.scrollHeight;
    connect();
  }

  document.addEventListener("DOMContentLoaded", () => {
    const pre = document.querySelector("pre[data-task-follow]");
    if (pre) follow(pre);
  });
})();
