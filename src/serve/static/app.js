// termorch serve's page. Plain browser script (no build step, no framework, nothing from a CDN).
// Everything shown from the server goes into the DOM as text (textContent), never as markup,
// except each run's timeline: HTML that termorch renders and escapes itself.
(() => {
  const token = new URLSearchParams(location.search).get("token") || "";
  const nonce = document.querySelector('meta[name="csp-nonce"]')?.getAttribute("content") || "";

  // xterm.js adds <style> elements of its own; the page's CSP lets in only those with its nonce.
  const createElement = document.createElement.bind(document);
  document.createElement = (tag, options) => {
    const el = createElement(tag, options);
    if (String(tag).toLowerCase() === "style") el.nonce = nonce;
    return el;
  };

  /** Every request carries the token, as the server refuses any other. */
  const withToken = (path) => `${path}${path.includes("?") ? "&" : "?"}token=${encodeURIComponent(token)}`;
  const $ = (id) => document.getElementById(id);

  /** An element with attributes (`class`, `data-*`, `title`...) and children (nodes or text). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "onclick") el.addEventListener("click", v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function duration(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "";
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  }

  function cost(usage) {
    if (!usage) return "";
    if (usage.cost_usd !== null && usage.cost_usd !== undefined) return `$${usage.cost_usd.toFixed(4)}`;
    const tokens = (usage.input_tokens || 0) + (usage.output_tokens || 0);
    return tokens ? `${tokens.toLocaleString()} tok` : "";
  }

  function clock(iso) {
    const d = iso ? new Date(iso) : null;
    return d && !Number.isNaN(d.getTime()) ? d.toLocaleTimeString() : "";
  }

  // ---- runs and tasks, live from /events ---------------------------------------------------------

  /** Per run (by its folder): its article, and what its timeline was last fetched for. */
  const runs = new Map();
  let receivedAt = Date.now();
  let lastView = null;

  function render(view) {
    lastView = view;
    receivedAt = Date.now();
    const tasks = view.runs.flatMap((r) => r.tasks);
    const running = tasks.filter((t) => t.state === "running").length;
    const redo = tasks.filter((t) => t.state === "redo").length;
    $("summary").textContent =
      `${view.runs.length} run${view.runs.length === 1 ? "" : "s"} · ${running} task${running === 1 ? "" : "s"} running${redo ? ` · ${redo} redo` : ""} · updated ${clock(view.generated_at)}`;

    const problems = $("problems");
    problems.hidden = view.problems.length === 0;
    problems.replaceChildren(
      ...view.problems.map((p) =>
        h("div", { class: "problem" }, p.run_id || p.run_dir || "run", ": ", p.message),
      ),
    );

    const queued = $("queued");
    queued.hidden = view.queued.length === 0;
    queued.replaceChildren(
      ...view.queued.map((q) =>
        h(
          "div",
          { class: "queued-run" },
          h("b", {}, q.run_id),
          ` queued since ${q.claimed_at ? clock(q.claimed_at) : "?"}: the daemon starts it when its workspace is free`,
        ),
      ),
    );

    const list = $("runs");
    const seen = new Set();
    // Newest first: the run an operator just started is at the top.
    const ordered = [...view.runs].reverse();
    for (const run of ordered) {
      seen.add(run.run_dir);
      let entry = runs.get(run.run_dir);
      if (!entry) {
        entry = makeRun(run);
        runs.set(run.run_dir, entry);
      }
      updateRun(entry, run);
    }
    for (const [dir, entry] of runs) {
      if (!seen.has(dir)) {
        entry.article.remove();
        runs.delete(dir);
      }
    }
    const articles = ordered.map((r) => runs.get(r.run_dir).article);
    if (articles.length === 0) list.replaceChildren(h("p", { class: "empty muted" }, "No runs yet."));
    else if (articles.some((a, i) => list.children[i] !== a)) list.replaceChildren(...articles);
    updateTerminalState();
  }

  function makeRun(run) {
    const head = h("div", { class: "run-head" });
    const tbody = h("tbody");
    const table = h(
      "table",
      { class: "tasks" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["task", "state", "wave", "time", "tries", "cost", "last line", ""].map((c) => h("th", {}, c)),
        ),
      ),
      tbody,
    );
    const timelineBody = h("div", { class: "tl-host" });
    const timeline = h(
      "details",
      { class: "timeline", open: true, hidden: true },
      h("summary", {}, "Timeline"),
      timelineBody,
    );
    // What waits for a person's decision: kept across views (not redrawn), so that a reason being
    // typed keeps its text and focus, and a click lands on the button it aimed at.
    const approvalList = h("div", { class: "approval-list" });
    const approvalResult = h("div", { class: "approval-result", role: "status" });
    const approvals = h("section", { class: "approvals", hidden: true }, approvalList, approvalResult);
    const article = h("article", { class: "run", "data-run": run.run_id }, head, approvals, table, timeline);
    return {
      article,
      head,
      tbody,
      timeline,
      timelineBody,
      approvals,
      approvalList,
      approvalResult,
      approvalItems: new Map(),
      signature: "",
      fetching: false,
      again: false,
    };
  }

  function updateRun(entry, run) {
    const counts = {};
    for (const t of run.tasks) counts[t.state] = (counts[t.state] || 0) + 1;
    const total = run.tasks.reduce((sum, t) => sum + (t.usage?.cost_usd || 0), 0);
    entry.article.dataset.phase = run.phase;
    const head = h(
      "div",
      { class: "run-head" },
      h("span", { class: `phase phase-${run.phase}` }, run.phase),
      h("span", { class: "run-id" }, run.run_id),
      h(
        "span",
        { class: "muted" },
        Object.entries(counts)
          .map(([s, n]) => `${n} ${s}`)
          .join(" · "),
      ),
      total > 0 ? h("span", { class: "muted" }, `· $${total.toFixed(4)}`) : null,
      run.exit_code !== null ? h("span", { class: "muted" }, `· exit ${run.exit_code}`) : null,
      run.budget ? budgetMeter(run.budget) : null,
      h("span", { class: "spacer" }),
      h(
        "span",
        { class: "muted small", title: run.run_dir },
        `started ${clock(run.started_at)} · ${run.workspace}`,
      ),
      run.hint ? h("div", { class: "hint" }, run.hint) : null,
      // Where its merge is: a bisect's probe under way, the culprit it found.
      run.merge
        ? h(
            "div",
            { class: "merge-line", "data-culprit": run.merge.culprit || "" },
            `merge: ${run.merge.line}`,
          )
        : null,
    );
    entry.head.replaceChildren(...head.childNodes);
    entry.tbody.replaceChildren(...run.tasks.map((t) => taskRow(run, t)));
    updateApprovals(entry, run);
    const signature = JSON.stringify([
      run.phase,
      run.report,
      run.merge?.line ?? null,
      run.tasks.map((t) => [t.state, t.attempts, t.waiting_since, t.waiting_quota_until, t.redo?.n ?? null]),
    ]);
    if (signature !== entry.signature) {
      entry.signature = signature;
      void refreshTimeline(entry, run);
    }
  }

  /** The run's budget against its spend: a meter, and the figures as `status` says them. */
  function budgetMeter(b) {
    const share = Math.max(
      b.max_cost_usd === null ? 0 : b.spent_usd / b.max_cost_usd,
      b.max_tokens === null ? 0 : b.spent_tokens / b.max_tokens,
    );
    const money = (n) => `$${n.toFixed(n < 1 ? 4 : 2)}`;
    const parts = [
      b.max_cost_usd === null ? null : `${money(b.spent_usd)} of ${money(b.max_cost_usd)}`,
      b.max_tokens === null
        ? null
        : `${b.spent_tokens.toLocaleString("en-US")} tokens of ${b.max_tokens.toLocaleString("en-US")}`,
    ].filter(Boolean);
    const mark = b.exhausted ? "exhausted" : b.warning ? "warning" : "ok";
    return h(
      "span",
      { class: `budget budget-${mark}`, "data-budget": mark },
      "· budget ",
      h("meter", {
        min: "0",
        max: "1",
        low: "0.8",
        high: "0.8",
        optimum: "0",
        value: String(Math.min(1, share)),
      }),
      ` ${parts.join(", ")} (${Math.floor(share * 100)} %)${b.exhausted ? ": exhausted" : ""}`,
    );
  }

  /** An attempt in a line: its agent, where it started, what it was told and decided (as `status` says it). */
  function attemptText(a) {
    const how = a.escalated ? `escalated to ${a.agent}` : `agent ${a.agent}`;
    const from = a.started_from ? `, from ${a.started_from.replace("_", " ")}` : "";
    const told = a.feedback ? `; told what went wrong: ${a.feedback}` : "";
    const decided = a.decision ? `; it decided ${a.decision.status}` : "";
    const end = a.finished_at ? ` → ${a.reason || "passed"}` : "";
    return `attempt ${a.n} (${how}${from})${told}${decided}${end}`;
  }

  /** A retry told what went wrong, or an escalation, is shown by the task's state. */
  function lastAttempt(t) {
    const last = (t.attempt_history || []).at(-1);
    if (!last || last.n < 2) return null;
    return h(
      "span",
      { class: "attempt muted", "data-attempt": String(last.n), title: attemptText(last) },
      last.escalated
        ? `escalated to ${last.agent}`
        : last.feedback
          ? "told what went wrong"
          : `attempt ${last.n}`,
    );
  }

  function taskRow(run, t) {
    const open = terminal && terminal.run === run.run_id && terminal.task === t.id;
    // A redo (run again because its result conflicted in the merge) is as live as a first run.
    const running = t.state === "running" || t.state === "redo";
    const live = running && t.session_live;
    const time = running ? t.elapsed_ms : t.duration_ms;
    const waiting = t.waiting_since
      ? h(
          "span",
          {
            class: "waiting",
            title: `since ${clock(t.waiting_since)}${t.waiting_for ? `: ${t.waiting_for}` : ""}`,
          },
          t.waiting_for ? `waiting: ${t.waiting_for}` : "waiting for input",
        )
      : null;
    // Its agent's CLI met a rate limit or a usage cap: its next attempt starts when it lifts.
    const quota = t.waiting_quota_until
      ? h(
          "span",
          { class: "waiting quota", "data-quota-until": t.waiting_quota_until },
          `waiting for a rate limit until ${clock(t.waiting_quota_until)}`,
        )
      : null;
    // It waits for a person's decision: the buttons are above the table (updateApprovals).
    const approval = t.waiting_approval
      ? h(
          "span",
          { class: "waiting approval-wait", title: approvalWords(t.waiting_approval) },
          "waiting for approval",
        )
      : null;
    // A blocked task whose agent asked for a person: said as loudly as a wait for input.
    const human = t.needs_human
      ? h(
          "span",
          { class: "waiting needs-human", title: t.detail || "" },
          `needs a person: ${t.detail || "(no reason given)"}`,
        )
      : null;
    const button = t.session_exists
      ? h(
          "button",
          {
            type: "button",
            class: live ? "watch live" : "watch",
            title: live
              ? "watch its tmux pane, read-only"
              : "its tmux session is kept: look at it, read-only",
            onclick: () => openTerminal(run.run_id, t.id),
          },
          live ? "▶ terminal" : "terminal",
        )
      : null;
    return h(
      "tr",
      { "data-task": t.id, "data-state": t.state, class: open ? "selected" : null },
      h(
        "td",
        { class: "task" },
        h("span", { class: "task-id" }, t.id),
        h("span", { class: "agent muted" }, t.agent),
      ),
      h(
        "td",
        {},
        t.state === "redo" && t.redo
          ? h(
              "span",
              {
                class: "state state-redo",
                "data-redo": String(t.redo.n),
                title:
                  t.redo.cause === "gate"
                    ? "a bisect found that its merge turns run.tests_cmd red: it runs again to fix it"
                    : `its result conflicted with ${t.redo.with.join(", ")} in ${t.redo.files.join(", ")}`,
              },
              `${t.redo.cause === "gate" ? "fix" : "redo"} ${t.redo.n}/${t.redo.of}`,
            )
          : h("span", { class: `state state-${t.state}` }, t.state),
        t.reason && t.state !== "success"
          ? h("span", { class: "reason muted", title: t.detail || "" }, t.reason)
          : null,
        waiting,
        quota,
        approval,
        lastAttempt(t),
        human,
        t.remote
          ? h(
              "span",
              { class: "reason muted", title: t.remote.attach },
              `on ${t.remote.worker} (${t.remote.host})`,
            )
          : null,
      ),
      h("td", { class: "num" }, t.wave ?? ""),
      h(
        "td",
        { class: "num time", "data-elapsed": running ? String(t.elapsed_ms ?? "") : null },
        duration(time),
      ),
      h(
        "td",
        { class: "num attempts", title: (t.attempt_history || []).map(attemptText).join("\n") },
        t.attempts || "",
      ),
      h("td", { class: "num" }, cost(t.usage)),
      h("td", { class: "last-line", title: t.last_line || "" }, t.last_line || ""),
      h("td", { class: "actions" }, button),
    );
  }

  // ---- approving or rejecting what waits for a person's decision ---------------------------------

  /** A wait in words, as `status` says it (contract/approval.ts's approvalLine), times in local time. */
  function approvalWords(w) {
    const what = approvalWhat(w);
    return `waiting for a person to approve ${what} (since ${clock(w.since)}${w.until ? `, until ${clock(w.until)}` : ""})`;
  }

  function approvalWhat(w) {
    return w.at === "start" ? "its start" : w.at === "result" ? `attempt ${w.attempt}'s result` : "the merge";
  }

  /** The run's waits: each task's, then its merge's (whose times the view gives in epoch ms). */
  function waitsOf(run) {
    const waits = run.tasks
      .filter((t) => t.waiting_approval)
      .map((t) => ({ task: t.id, wait: t.waiting_approval }));
    const m = run.merge;
    if (m && m.step === "waiting_approval" && m.approval) {
      const iso = (ms) => (typeof ms === "number" ? new Date(ms).toISOString() : ms);
      waits.push({
        task: null,
        wait: { ...m.approval, since: iso(m.approval.since), until: iso(m.approval.until) },
      });
    }
    return waits;
  }

  /**
   * Above the run's tasks, a line for each wait for a person's decision: what waits, an Approve
   * button, and a reason (required to reject, the task's next attempt is told it) with a Reject
   * button. A wait's line stays as it is while it waits (same task, point and attempt).
   */
  function updateApprovals(entry, run) {
    const waits = waitsOf(run);
    const keep = new Set();
    const lines = waits.map((w) => {
      const key = `${w.task ?? ""}|${w.wait.at}|${w.wait.attempt}`;
      keep.add(key);
      let item = entry.approvalItems.get(key);
      if (!item) {
        item = approvalItem(entry, run.run_id, w);
        entry.approvalItems.set(key, item);
      }
      return item;
    });
    for (const [key, item] of entry.approvalItems) {
      if (!keep.has(key)) {
        item.remove();
        entry.approvalItems.delete(key);
      }
    }
    if (
      lines.some((el, i) => entry.approvalList.children[i] !== el) ||
      entry.approvalList.children.length !== lines.length
    )
      entry.approvalList.replaceChildren(...lines);
    entry.approvals.hidden = lines.length === 0 && entry.approvalResult.textContent === "";
  }

  function approvalItem(entry, runId, w) {
    const reason = h("input", {
      type: "text",
      class: "approval-reason",
      autocomplete: "off",
      spellcheck: "false",
      maxlength: "16384",
      placeholder: "reason: required to reject (the next attempt is told it)",
      "aria-label": "reason",
    });
    const approve = h("button", { type: "button", class: "approve" }, "Approve");
    const reject = h("button", { type: "submit", class: "reject" }, "Reject");
    const form = h("form", { class: "approval-form" }, reason, reject);
    const item = h(
      "div",
      {
        class: "approval",
        "data-task": w.task,
        "data-merge": w.task === null,
        "data-at": w.wait.at,
        "data-attempt": String(w.wait.attempt),
      },
      w.task === null ? h("b", {}, "merge") : h("b", { class: "task-id" }, w.task),
      h("span", { class: "waiting approval-line" }, approvalWords(w.wait)),
      approve,
      form,
    );
    const buttons = [approve, reject];
    approve.addEventListener("click", () => void decideWait(entry, runId, w, "approve", reason, buttons));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void decideWait(entry, runId, w, "reject", reason, buttons);
    });
    return item;
  }

  function setApprovalResult(entry, text, outcome, decision) {
    const el = entry.approvalResult;
    el.textContent = text;
    el.dataset.outcome = outcome;
    if (decision) el.dataset.decision = decision;
    else delete el.dataset.decision;
    entry.approvals.hidden = false;
  }

  /** Posts a decision (the server writes it as `termorch approve|reject` does, by "serve"), then says how it went. */
  async function decideWait(entry, runId, w, verb, reasonInput, buttons) {
    const reason = reasonInput.value.trim();
    const what = w.task === null ? "the merge" : `task ${w.task} (${approvalWhat(w.wait)})`;
    const done = verb === "approve" ? "approved" : "rejected";
    if (verb === "reject" && reason === "") {
      setApprovalResult(
        entry,
        `not rejected: a rejection needs its reason (what is wrong), in the field next to Reject`,
        "bad",
      );
      reasonInput.focus();
      return;
    }
    for (const b of buttons) b.disabled = true;
    setApprovalResult(entry, `${verb === "approve" ? "approving" : "rejecting"} ${what}…`, "wait");
    const path =
      w.task === null
        ? `/runs/${encodeURIComponent(runId)}/merge/${verb}`
        : `/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(w.task)}/${verb}`;
    try {
      const res = await fetch(withToken(path), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(reason === "" ? {} : { reason }),
      });
      const body = await res.json().catch(() => ({}));
      if (res.ok) {
        const detail = body.detail ? ` · ${body.detail}` : "";
        setApprovalResult(entry, `${done} ${what}${reason ? `: ${reason}` : ""}${detail}`, "ok", verb);
        return;
      }
      setApprovalResult(entry, `not ${done}: ${body.error || res.status}`, "bad");
    } catch {
      setApprovalResult(entry, `not ${done}: the dashboard cannot be reached`, "bad");
    }
    for (const b of buttons) b.disabled = false;
  }

  // A running task's time moves on between views.
  setInterval(() => {
    for (const cell of document.querySelectorAll("td.time[data-elapsed]")) {
      const base = Number(cell.dataset.elapsed);
      if (cell.dataset.elapsed !== "" && Number.isFinite(base))
        cell.textContent = duration(base + Date.now() - receivedAt);
    }
  }, 1000);

  // ---- timelines ---------------------------------------------------------------------------------

  let timelineCss = null;

  /** A running run's bars grow with time: its timeline is fetched again now and then. */
  const TIMELINE_TICK_MS = 5000;
  setInterval(() => {
    for (const run of lastView?.runs ?? []) {
      const entry = runs.get(run.run_dir);
      if (entry && run.phase === "running") void refreshTimeline(entry, run);
    }
  }, TIMELINE_TICK_MS);

  /** Fetches a run's timeline (rendered by the server from its ledger and report); one fetch at a time per run. */
  async function refreshTimeline(entry, run) {
    if (entry.fetching) {
      entry.again = run;
      return;
    }
    entry.fetching = true;
    try {
      const res = await fetch(withToken(`/runs/${encodeURIComponent(run.run_id)}/timeline`));
      const body = res.ok ? await res.json() : { html: null };
      if (body.html) {
        if (body.css && timelineCss === null) {
          timelineCss = document.createElement("style");
          timelineCss.textContent = body.css;
          document.head.append(timelineCss);
        }
        entry.timelineBody.innerHTML = body.html;
        entry.timeline.hidden = false;
      } else entry.timeline.hidden = true;
    } catch {
      // The server went away: the event stream says so (connection state), and the next view fetches again.
    } finally {
      entry.fetching = false;
      if (entry.again) {
        const next = entry.again;
        entry.again = false;
        void refreshTimeline(entry, next);
      }
    }
  }

  // ---- the live read-only terminal ---------------------------------------------------------------

  /** The open terminal: which task, its event stream and xterm. */
  let terminal = null;

  function openTerminal(runId, taskId) {
    closeTerminal();
    const panel = $("terminal-panel");
    panel.hidden = false;
    $("term-title").textContent = `${taskId} · ${runId}`;
    setTermState("connecting…", "wait");
    const box = $("terminal");
    box.replaceChildren();
    const stream = new EventSource(
      withToken(`/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(taskId)}/terminal`),
    );
    const current = { run: runId, task: taskId, stream, term: null, ended: false };
    terminal = current;
    stream.addEventListener("size", (e) => {
      const { cols, rows } = JSON.parse(e.data);
      if (current.term) {
        // A reconnect: tmux draws the whole screen again.
        current.term.reset();
        current.term.resize(cols, rows);
      } else {
        current.term = new window.Terminal({
          cols,
          rows,
          disableStdin: true,
          cursorBlink: false,
          scrollback: 0,
          fontSize: 13,
          fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
          theme: { background: "#0b0f14", foreground: "#d6dde6", cursor: "#0b0f14" },
        });
        current.term.open(box);
        fitFont(current.term, box);
      }
      setTermState("live", "live");
    });
    stream.addEventListener("message", (e) => current.term?.write(JSON.parse(e.data)));
    stream.addEventListener("end", () => {
      current.ended = true;
      setTermState("session ended", "ended");
    });
    stream.addEventListener("error", () => {
      // The server ends the stream after `end`: closed here, once complete, it is not opened again.
      if (current.ended) {
        stream.close();
        return;
      }
      setTermState(stream.readyState === EventSource.CLOSED ? "not available" : "reconnecting…", "wait");
    });
    markSelected();
  }

  /**
   * The terminal has the pane's columns (often 200): the font is sized so that they fill the
   * panel's width, between 7 px (a wide pane) and 15 px (a narrow one).
   */
  function fitFont(term, box) {
    const screen = box.querySelector(".xterm-screen");
    const avail = box.clientWidth - 16;
    if (!screen || screen.offsetWidth === 0) return;
    const size = Math.floor(((term.options.fontSize * avail) / screen.offsetWidth) * 10) / 10;
    term.options.fontSize = Math.min(15, Math.max(7, size));
  }

  function setTermState(text, kind) {
    const el = $("term-state");
    el.textContent = text;
    el.className = `term-state term-${kind}`;
  }

  function closeTerminal() {
    if (!terminal) return;
    terminal.stream.close();
    terminal.term?.dispose();
    terminal = null;
    $("terminal-panel").hidden = true;
    markSelected();
  }

  function markSelected() {
    for (const row of document.querySelectorAll("tr[data-task]")) {
      const article = row.closest("article");
      row.classList.toggle(
        "selected",
        !!terminal && article?.dataset.run === terminal.run && row.dataset.task === terminal.task,
      );
    }
  }

  /** Shows, next to the terminal, the state its task is in now, and how to answer it when it waits. */
  function updateTerminalState() {
    markSelected();
    if (!terminal || !lastView) return;
    const run = lastView.runs.findLast((r) => r.run_id === terminal.run);
    const task = run?.tasks.find((t) => t.id === terminal.task);
    if (task) $("term-title").textContent = `${task.id} · ${run.run_id} · ${task.state}`;
    updateAnswer(task);
  }

  // ---- answering a task that waits for input -----------------------------------------------------

  /**
   * Under the open terminal of a task waiting for input: what it asks, a button for each answer of
   * a question termorch knows (the keys `termorch send --keys` presses), and a line of text.
   */
  function updateAnswer(task) {
    const bar = $("answer");
    const waiting = !!task && task.state === "running" && task.session_live && !!task.waiting_since;
    bar.hidden = !waiting;
    if (!waiting) return;
    $("answer-asks").textContent = task.waiting_for ? `waiting: ${task.waiting_for}` : "waiting for input";
    const answers = task.waiting_answers || [];
    // Rebuilt only when they change: a click must not land on a button being replaced.
    const signature = JSON.stringify(answers);
    if (bar.dataset.answers === signature) return;
    bar.dataset.answers = signature;
    $("answer-keys").replaceChildren(
      ...answers.map((a) =>
        h(
          "button",
          {
            type: "button",
            class: "answer-key",
            "data-keys": a.keys.join(" "),
            title: `presses ${a.keys.join(", ")}`,
            onclick: () => void sendAnswer({ keys: a.keys }),
          },
          h("kbd", {}, a.keys.join(" ")),
          " ",
          a.picks,
        ),
      ),
    );
  }

  /** Sends an answer to the open terminal's task (the server types it as `termorch send` does). */
  async function sendAnswer(answer) {
    if (!terminal) return;
    const result = $("answer-result");
    result.textContent = "sending…";
    try {
      const res = await fetch(
        withToken(
          `/runs/${encodeURIComponent(terminal.run)}/tasks/${encodeURIComponent(terminal.task)}/send`,
        ),
        { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(answer) },
      );
      const body = await res.json().catch(() => ({}));
      result.textContent = res.ok ? "sent" : `not sent: ${body.error || res.status}`;
      if (res.ok && answer.text !== undefined) $("answer-text").value = "";
    } catch {
      result.textContent = "not sent: the dashboard cannot be reached";
    }
  }

  $("answer-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("answer-text").value;
    if (text !== "") void sendAnswer({ text });
  });

  $("term-close").addEventListener("click", closeTerminal);

  // ---- connection ----------------------------------------------------------------------------------

  const events = new EventSource(withToken("/events"));
  events.addEventListener("view", (e) => render(JSON.parse(e.data)));
  events.addEventListener("open", () => {
    $("conn").textContent = "live";
    $("conn").className = "conn conn-live";
  });
  events.addEventListener("error", () => {
    $("conn").textContent = events.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…";
    $("conn").className = "conn conn-wait";
  });
  // Closed before the page goes, so that no request is cut mid-way.
  window.addEventListener("pagehide", () => {
    events.close();
    closeTerminal();
  });
})();
