// The dashboard's event streams: a subscription reads its stream, reconnects by itself and
// tells the page (through the hooks dashboard.js gives it) when it is paused, back or ended.
// No build step; loaded before dashboard.js.
"use strict";

const wkEventStreams = (() => {
  // Event streams are read through fetch, not EventSource: the browser's EventSource gives up
  // for good on a non-200 answer (a 429 when this token already holds its share of streams, a
  // 502 while the server restarts) and never shows that answer's Retry-After. A subscription
  // reconnects by itself: at once (after the stream's `retry:`) when the server ended the
  // stream, with backoff and at least the server's Retry-After when it was refused or lost, and
  // says so on the page meanwhile.
  const RETRY_FIRST_MS = 1000;
  const RETRY_MOST_MS = 30000;
  // A Retry-After is honoured up to this; a longer one is the server's mistake.
  const RETRY_AFTER_MOST_MS = 120000;
  // Why each failing subscription fails: "refused" (the server said not now) or "lost".
  const failing = new Map();
  let leaving = false;
  window.addEventListener("pagehide", () => { leaving = true; });
  // Every open subscription, closed at once when the session ends.
  const subscriptions = new Set();

  // What dashboard.js does about a stream's state; nothing until it says.
  let hooks = {
    sayLive() {}, sayBack() {}, refused: () => false, sessionEnded() {},
  };

  function retryAfterMs(header) {
    if (!header) return 0;
    const seconds = /^\s*\d+(\.\d+)?\s*$/.test(header)
      ? Number(header)
      : (Date.parse(header) - Date.now()) / 1000;
    return Number.isFinite(seconds) ? Math.min(RETRY_AFTER_MOST_MS, Math.max(0, seconds * 1000)) : 0;
  }

  // handlers: {eventName: (message) => ...}, plus an optional `state(name)` told "paused" when
  // the stream cannot connect and "ended" when the session has. Returns {close()}.
  // `startId` is the id of the last event the page was drawn with: the server replays what
  // came after it (or says resync).
  function subscribe(url, handlers, key, startId = "") {
    let lastId = startId;
    let retryMs = RETRY_FIRST_MS;
    let failures = 0;
    let closed = false;
    let timer = null;
    let controller = null;
    const tell = (name) => { if (handlers.state) handlers.state(name); };

    function close() {
      closed = true;
      clearTimeout(timer);
      if (controller) controller.abort();
      failing.delete(key);
      subscriptions.delete(subscription);
      hooks.sayLive();
    }

    function again(serverMs, why = "lost") {
      if (closed || leaving) return;
      failures += 1;
      failing.set(key, why);
      tell("paused");
      hooks.sayLive();
      const backoff = Math.min(RETRY_MOST_MS, RETRY_FIRST_MS * 2 ** (failures - 1));
      const jittered = backoff / 2 + (Math.random() * backoff) / 2;
      timer = setTimeout(connect, Math.max(jittered, serverMs));
    }

    function dispatch(event) {
      if (!event.data.length) return;
      const handler = handlers[event.type || "message"];
      if (handler) handler({ data: event.data.join("\n"), lastEventId: lastId });
    }

    async function read(body) {
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let event = { type: "", data: [] };
      for (;;) {
        const { value, done } = await reader.read();
        if (done || closed) return;
        buffer += value;
        const lines = buffer.split("\n");
        buffer = lines.pop();
        for (const raw of lines) {
          const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
          if (line === "") { dispatch(event); event = { type: "", data: [] }; continue; }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let text = colon < 0 ? "" : line.slice(colon + 1);
          if (text.startsWith(" ")) text = text.slice(1);
          if (field === "event") event.type = text;
          else if (field === "data") event.data.push(text);
          else if (field === "id" && !text.includes("\0")) lastId = text;
          else if (field === "retry" && /^\d+$/.test(text)) retryMs = Number(text);
          if (closed) return;
        }
      }
    }

    async function connect() {
      if (closed) return;
      controller = new AbortController();
      const headers = { Accept: "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      let response;
      try {
        response = await fetch(url, {
          headers, credentials: "same-origin", cache: "no-store", signal: controller.signal,
        });
      } catch (_error) {
        again(0);
        return;
      }
      const type = response.headers.get("content-type") || "";
      if (hooks.refused(response) || (response.ok && !type.startsWith("text/event-stream"))) {
        response.body?.cancel();
        close();
        hooks.sessionEnded();
        return;
      }
      if (!response.ok) {
        response.body?.cancel();
        const why = response.status === 429 ? "refused" : "lost";
        again(retryAfterMs(response.headers.get("retry-after")), why);
        return;
      }
      const wasLost = failing.get(key) === "lost";
      failures = 0;
      failing.delete(key);
      if (wasLost) hooks.sayBack(); else hooks.sayLive();
      try {
        await read(response.body);
      } catch (_error) {
        again(0);
        return;
      }
      if (!closed) timer = setTimeout(connect, retryMs);
    }

    const subscription = { close };
    subscriptions.add(subscription);
    connect();
    return subscription;
  }

  return {
    subscribe,
    // Whether a stream is down while the page stays open (a page being left is not paused).
    paused: () => failing.size > 0 && !leaving,
    closeAll() { for (const subscription of [...subscriptions]) subscription.close(); },
    use(given) { hooks = given; },
  };
})();
window.wkEventStreams = wkEventStreams;
