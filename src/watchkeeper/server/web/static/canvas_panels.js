// The supervision canvas's panels: a node's details, its actions, the question before one,
// and what the server answered. canvas.js calls window.wkCanvasPanels once, at start.
"use strict";

window.wkCanvasPanels = (c) => {
  const {
    $, svg, view, panel, sheet, st, EXTRA, csrf, nodeElement, isSupervisor, nameOf, kindOf, load,
  } = c;

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
    const extra = $("sup-extra");
    extra.replaceChildren();
    EXTRA.describe?.(row, (term, value) => fact(facts, term, value), extra);
    c.describeRoute?.(row, (term, value) => fact(facts, term, value), extra);
    $("sup-actions").hidden = actionsOf(row).length === 0;
    panel.dataset.key = row.key;
  }

  function select(key, { focusPanel = false } = {}) {
    const row = st.nodes.get(key);
    if (!row) return;
    st.selected = key;
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
      const key = st.selected;
      st.selected = null;
      if (key) nodeElement(key)?.focus({ preventScroll: true });
    } else if (!panel.hidden) {
      $("sup-actions").focus({ preventScroll: true });
    } else if (st.selected) {
      nodeElement(st.selected)?.focus({ preventScroll: true });
    }
  }

  function hide(element) {
    element.hidden = true;
    element.classList.remove("flung");
    element.style.transform = "";
  }

  // The server refuses a viewer's press (403): a viewer is offered none.
  const mayAct = () => svg.dataset.admin === "true";

  function actionsOf(row) {
    if (!mayAct()) return [];
    const item = row.item;
    const more = EXTRA.actions?.(row) || [];
    if (more.length) return more;
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
    if (isSupervisor(row) && row.item.strategy) {
      const to = STRATEGY_NEXT[row.item.strategy] || "one_for_one";
      const path = item.id.split("/").map(encodeURIComponent).join("/");
      return [{
        label: `Switch to ${to.replaceAll("_", "-")}`, verb: "switch",
        url: `/web/canvas/supervisors/${path}/strategy`, body: { strategy: to },
        question: `Switch ${nameOf(row)} from ${item.strategy.replaceAll("_", "-")} to ${to.replaceAll("_", "-")}?`,
      }];
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
    const row = st.nodes.get(key);
    if (!row) return;
    if (st.selected !== key || panel.hidden) select(key);
    const actions = actionsOf(row);
    $("sup-sheet-title").textContent = `Actions for ${nameOf(row)}`;
    const choices = $("sup-choices");
    choices.replaceChildren();
    if (!actions.length) {
      const none = document.createElement("p");
      none.className = "muted";
      none.textContent = mayAct()
        ? `No action applies to this ${kindOf(row)}.`
        : "Only admins restart, stop or open breakers: this session is a viewer's.";
      choices.append(none);
    }
    for (const action of actions) {
      if (action.note) {
        const note = document.createElement("p");
        note.className = "sup-note";
        note.textContent = action.note;
        choices.append(note);
      }
      if (action.input) {
        const label = document.createElement("label");
        label.className = "sup-field";
        label.textContent = action.input.label;
        const input = document.createElement("input");
        input.type = "number";
        input.step = "any";
        input.min = "0";
        input.value = String(action.input.value);
        input.name = action.input.name;
        label.append(input);
        choices.append(label);
        action.read = () => ({ ...(action.body || {}), [action.input.name]: Number(input.value) });
      }
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
    const first = choices.querySelector("input, button") || $("sup-sheet-close");
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
    answer.textContent = (await post(action.url, action.read ? action.read() : action.body)).message;
    if (!panel.hidden) $("sup-actions").focus({ preventScroll: true });
    load();
  }

  // A post with the session's CSRF token; its answer's message, in words whatever happened.
  async function post(url, body) {
    const headers = { Accept: "application/json", "X-CSRF-Token": csrf() };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    try {
      const response = await fetch(url, {
        method: "POST", credentials: "same-origin", headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      let found = {};
      try { found = await response.json(); } catch (_e) { found = {}; }
      return { ok: response.ok && found.ok !== false, message: found.message || `the server answered ${response.status}`, body: found };
    } catch (error) {
      return { ok: false, message: `no answer from the server: ${error}`, body: {} };
    }
  }

  // What a gesture or a key did, said in the panel (opened on its node if need be).
  function say(key, message) {
    if (key && (st.selected !== key || panel.hidden)) select(key);
    $("sup-answer").textContent = message;
  }

  const STRATEGY_NEXT = { one_for_one: "one_for_all", one_for_all: "one_for_one", rest_for_one: "one_for_all" };

  // Two fingers turned on a supervisor (or its key): one-for-one and one-for-all in turn.
  async function switchStrategy(row) {
    if (!isSupervisor(row)) return;
    if (!mayAct()) { say(row.key, "Only admins switch a supervisor's strategy: this session is a viewer's."); return; }
    const to = STRATEGY_NEXT[row.item.strategy] || "one_for_one";
    const path = row.item.id.split("/").map(encodeURIComponent).join("/");
    say(row.key, `Switching ${nameOf(row)} to ${to.replaceAll("_", "-")}…`);
    const answer = await post(`/web/canvas/supervisors/${path}/strategy`, { strategy: to });
    $("sup-answer").textContent = answer.message;
    load();
  }

  function cancelAsk() {
    pending = null;
    $("sup-confirm").hidden = true;
    ($("sup-choices").querySelector("input, button") || $("sup-sheet-close")).focus();
  }

  return { describe, select, show, dismiss, hide, mayAct, offer, act, post, say, switchStrategy, cancelAsk };
};
