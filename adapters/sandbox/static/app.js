// Marlowe sandbox: the page. Plain JavaScript, no build step.
// State comes from GET /api/workspace (the directory) and the event stream
// GET /api/events (every message's latest state, keyed by id, ordered by rev).
"use strict";

(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  const REASONS = {
    "dm": "A direct message always reaches Marlowe.",
    "mention": "The message @mentions Marlowe.",
    "reply-to-bot": "An explicit reply to one of Marlowe's messages.",
    "thread-window": "Marlowe posted in this thread less than 20 minutes ago, so it follows the conversation, whoever writes.",
    "toplevel-window": "Marlowe answered this person at top level less than 6 minutes ago, so their next top-level message still reaches it.",
    "not-a-person-message": "Bots, edits and joins are never routed.",
    "addressed-to-others": "The message mentions someone else, a group or a broadcast (@here, @channel) and not Marlowe, so Marlowe stays out of it.",
    "private-no-window": "In a private channel only messages that @mention Marlowe reach it; this one was not stored or read.",
    "no-window": "Nothing addressed Marlowe and no conversation window was open, so the message never reached it: not stored, not read.",
  };
  // The verdict in a few words, shown on the page under each message (the
  // badge's tooltip keeps the long form).
  const SAYS = {
    "dm": "Reached Marlowe: a direct message.",
    "mention": "Reached Marlowe: it @mentions Marlowe.",
    "reply-to-bot": "Reached Marlowe: a reply to Marlowe's message.",
    "thread-window": "Reached Marlowe: Marlowe is in this thread (for 20 minutes after its last post).",
    "toplevel-window": "Reached Marlowe: Marlowe just answered this person (6-minute window).",
    "not-a-person-message": "Not for Marlowe: bots, edits and joins never are.",
    "addressed-to-others": "Not for Marlowe: it addresses someone else, a group or everyone.",
    "private-no-window": "Not for Marlowe: in a private channel, only @mentions reach it.",
    "no-window": "Not for Marlowe: nothing addressed it and no conversation was open. Not stored, not read.",
  };
  const DEGRADED = "degraded: memory was searched by keywords only (no embedding model is configured, or it failed), so notes worded differently can be missed.";
  const EMOJI = {
    eyes: "👀", white_check_mark: "✅", heavy_check_mark: "✔️", check: "✅", x: "❌", hourglass: "⏳",
    hourglass_flowing_sand: "⏳", thumbsup: "👍", "+1": "👍", thinking_face: "🤔", warning: "⚠️",
    rocket: "🚀", tada: "🎉", no_entry: "⛔", memo: "📝", raised_hands: "🙌", wave: "👋",
  };

  const state = {
    ws: null,
    me: localStorage.getItem("marlowe.me") || "alice",
    channel: localStorage.getItem("marlowe.channel") || "general",
    thread: null,
    msgs: new Map(),
    epoch: null,
    seen: new Set(),       // ids rendered once (for the arrival flash)
    clicked: new Map(),    // person|message id -> rev at click (that person's buttons wait for a new rev)
    clickErr: new Map(),   // person|message id -> why the page could not send the click
    lastRead: new Map(),   // channel -> newest top-level id seen
    baseline: null,        // revision at first connect: older messages count as read
    typing: [],            // {channel, thread, until}: "Marlowe is thinking…" (core.Typing)
  };

  // ---- directory helpers ----
  const member = (id) => id === state.ws.bot.id ? state.ws.bot : state.ws.people.find((p) => p.id === id);
  const channel = (id) => state.ws.channels.find((c) => c.id === id);
  // An ephemeral message (m.to) is shown to that one person only.
  const shown = (m) => !m.to || m.to === state.me;
  const canSee = (c, who = state.me) => c && (c.visibility === "dm" ? c.dm_with === who : (!c.members || c.members.includes(who)));

  function avatar(m, cls = "avatar") {
    const a = el("div", cls + (m && m.bot ? " bot" : ""), m ? m.name[0] : "?");
    if (m && !m.bot) a.style.background = m.color;
    return a;
  }

  // ---- text rendering: markdown.js, with mention tokens resolved here ----
  const esc = window.MarloweMarkdown.esc;
  function mentionHTML(body) {
    if (body[0] === "@") {
      const who = member(body.slice(1));
      const cls = "mention" + (body.slice(1) === state.me ? " me" : "");
      return `<span class="${cls}" data-mention="${esc(body.slice(1))}">@${esc(who ? who.name : body.slice(1))}</span>`;
    }
    if (body[0] === "#") {
      const ch = channel(body.slice(1));
      // A DM is not a channel: "#Marlowe" named the bot, not the place.
      const name = ch && ch.visibility === "dm" ? "your DM with Marlowe" : "#" + (ch ? ch.name : body.slice(1));
      return `<span class="chanlink" data-channel="${esc(body.slice(1))}">${esc(name)}</span>`;
    }
    if (body.startsWith("!subteam^")) return `<span class="mention">@${esc(body.slice(9))}</span>`;
    return `<span class="mention bc">@${esc(body.slice(1))}</span>`;
  }
  const renderText = (text) => window.MarloweMarkdown.render(text, mentionHTML);
  const hhmm = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

  // ---- message views ----
  function whyBadge(m) {
    if (m.bot) return null;
    const b = el("span", "why");
    if (m.decision) {
      const r = m.decision.reason || "";
      b.classList.add(m.decision.route ? "route" : "ignore");
      b.textContent = (m.decision.route ? "routed" : "ignored") + " · " + r;
      b.title = (m.decision.route ? "Marlowe received this message. " : "Marlowe did not receive this message. ") + (REASONS[r] || r);
      b.dataset.route = String(m.decision.route);
      b.dataset.reason = r;
    } else if (m.state === "failed") {
      b.classList.add("failed");
      b.textContent = "delivery failed";
    } else if (m.state === "delivered") {
      b.classList.add("pending");
      b.textContent = "delivered";
      b.title = "Handed to the bot; its intent filter decides whether to answer.";
    } else {
      b.classList.add("pending");
      b.textContent = "sending…";
    }
    return b;
  }

  function cardView(m) {
    const c = m.card;
    const box = el("div", "card" + (c.resolution ? " resolved" : ""));
    box.dataset.card = c.id;
    const title = el("div", "card-title");
    title.innerHTML = renderText(c.title);
    box.appendChild(title);
    if (c.body) {
      const b = el("div", "card-body");
      b.innerHTML = renderText(c.body);
      box.appendChild(b);
    }
    if (c.fields && c.fields.length) {
      const dl = el("dl", "card-fields");
      for (const f of c.fields) {
        dl.appendChild(el("dt", "", f.label));
        const dd = el("dd");
        dd.innerHTML = renderText(f.value);
        dl.appendChild(dd);
      }
      box.appendChild(dl);
    }
    if (c.resolution) {
      const res = el("div", "card-resolution");
      res.innerHTML = renderText(c.resolution);
      box.appendChild(res);
    } else if (c.actions && c.actions.length) {
      const row = el("div", "card-actions");
      // Per person, as on a real platform: my click in flight disables my
      // buttons only; the server lists whose clicks it is still handling.
      const mine = state.me + "|" + m.id;
      const waiting = state.clicked.get(mine) === m.rev || (m.clicking || []).includes(state.me);
      row.dataset.waiting = String(waiting);
      for (const a of c.actions) {
        const btn = el("button", "btn" + (a.style ? " " + a.style : ""), a.label);
        btn.dataset.action = a.id;
        btn.dataset.msg = m.id;
        btn.disabled = waiting;
        row.appendChild(btn);
      }
      box.appendChild(row);
    }
    const notice = m.notice || state.clickErr.get(state.me + "|" + m.id);
    if (notice) box.appendChild(el("div", "notice", notice));
    return box;
  }

  // A streamed run's plan (plan.js).
  const planView = (m) => window.MarlowePlan.view(m.stream, el, renderText);

  function msgView(m, opts = {}) {
    const who = member(m.author);
    const row = el("div", "msg");
    row.dataset.id = m.id;
    row.dataset.author = m.author;
    if (m.to) {
      row.classList.add("ephemeral");
      row.dataset.ephemeral = "true";
    }
    if (opts.clickable) row.classList.add("clickable");
    if (state.thread === m.id && opts.clickable) row.classList.add("open");
    if (!state.seen.has(m.id + ":" + (opts.where || ""))) {
      if (state.seen.size > 0 && opts.flash) row.classList.add("fresh");
      state.seen.add(m.id + ":" + (opts.where || ""));
    }
    row.appendChild(avatar(who));
    const body = el("div", "body");
    const meta = el("div", "meta");
    meta.appendChild(el("span", "name", who ? who.name : m.author));
    if (m.bot) meta.appendChild(el("span", "badge", "APP"));
    const t = el("span", "time", hhmm(m.at));
    t.title = new Date(m.at).toLocaleString();
    meta.appendChild(t);
    if (m.edited) meta.appendChild(el("span", "edited", "(edited)"));
    if (m.to) {
      const only = el("span", "only-you", "Only visible to you");
      only.title = "An ephemeral message: nobody else in the channel sees it, and it is gone after a restart.";
      meta.appendChild(only);
    }
    const why = whyBadge(m);
    if (why) meta.appendChild(why);
    body.appendChild(meta);
    // A card's text is its plain fallback (notifications, platforms without
    // cards), as on Slack: the card is what is shown.
    const open = m.stream && !m.stream.stopped;
    if (m.stream) {
      row.classList.add("streamed");
      row.dataset.stream = open ? "open" : "stopped";
      if (open) row.setAttribute("aria-busy", "true");
      const plan = planView(m);
      if (plan) body.appendChild(plan);
    }
    if (m.text && !m.card) {
      const tx = el("div", "text" + (open ? " streaming" : ""));
      tx.innerHTML = renderText(m.text);
      body.appendChild(tx);
    } else if (open && !m.text) {
      body.appendChild(el("div", "text writing", "Marlowe is working…"));
    }
    if (m.decision) {
      const r = m.decision.reason || "";
      const says = el("div", "why-text " + (m.decision.route ? "route" : "ignore"), SAYS[r] || REASONS[r] || r);
      says.dataset.reason = r;
      body.appendChild(says);
    }
    if (m.bot && /\(degraded\)/.test(m.text || "")) body.appendChild(el("div", "degraded-note", DEGRADED));
    if (m.card) body.appendChild(cardView(m));
    if (m.reactions && m.reactions.length) {
      const rs = el("div", "reactions");
      for (const r of m.reactions) {
        const chip = el("span", "reaction");
        chip.dataset.emoji = r;
        chip.title = `Marlowe reacted with :${r}:`;
        chip.appendChild(el("span", "glyph", EMOJI[r] || (/^[\w+-]+$/.test(r) ? ":" + r + ":" : r)));
        chip.appendChild(el("span", "who", "Marlowe"));
        rs.appendChild(chip);
      }
      body.appendChild(rs);
    }
    if (opts.replies && opts.replies.length) {
      const rp = el("div", "replies");
      const stack = el("span", "stack");
      const authors = [...new Set(opts.replies.map((r) => r.author))].slice(0, 4);
      for (const a of authors) stack.appendChild(avatar(member(a)));
      rp.appendChild(stack);
      rp.appendChild(el("span", "count", opts.replies.length + (opts.replies.length === 1 ? " reply" : " replies")));
      rp.appendChild(el("span", "last", "Last reply " + hhmm(opts.replies[opts.replies.length - 1].at)));
      body.appendChild(rp);
    }
    row.appendChild(body);
    return row;
  }

  // ---- rendering ----
  let scheduled = false;
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; render(); });
  }

  function sorted(filter) {
    return [...state.msgs.values()].filter(filter).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  function renderPeople() {
    const box = $("#people");
    box.replaceChildren();
    for (const p of state.ws.people) {
      const b = el("button", "person-btn");
      b.setAttribute("role", "radio");
      b.setAttribute("aria-checked", String(p.id === state.me));
      b.dataset.person = p.id;
      b.title = `${p.name} — ${p.title}`;
      b.appendChild(avatar(p));
      b.appendChild(el("span", "", p.name));
      b.onclick = () => setMe(p.id);
      box.appendChild(b);
    }
  }

  function renderSidebar() {
    const chans = $("#channels"), dms = $("#dms");
    chans.replaceChildren();
    dms.replaceChildren();
    for (const c of state.ws.channels) {
      if (!canSee(c)) continue;
      const li = el("li", "chan" + (c.id === state.channel ? " active" : ""));
      li.dataset.channel = c.id;
      if (c.visibility === "dm") {
        li.appendChild(avatar(state.ws.bot, "avatar mini-avatar"));
        li.appendChild(el("span", "", "Marlowe"));
      } else {
        li.appendChild(el("span", "glyph", c.visibility === "private" ? "🔒" : "#"));
        li.appendChild(el("span", "", c.name));
      }
      const unread = unreadCount(c.id);
      if (unread > 0 && c.id !== state.channel) li.appendChild(el("span", "unread", String(unread)));
      li.onclick = () => setChannel(c.id);
      (c.visibility === "dm" ? dms : chans).appendChild(li);
    }
  }

  function unreadCount(chID) {
    const seen = state.lastRead.get(chID) || "";
    let n = 0;
    for (const m of state.msgs.values()) {
      if (m.channel === chID && !m.thread && shown(m) && m.id > seen && m.rev > (state.baseline ?? Infinity)) n++;
    }
    return n;
  }

  function stickToBottom(box, fn) {
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    const top = box.scrollTop;
    fn();
    box.scrollTop = atBottom ? box.scrollHeight : top;
  }

  function renderMain() {
    const c = channel(state.channel);
    const title = $("#chan-title");
    title.textContent = c.visibility === "dm" ? "Marlowe" : (c.visibility === "private" ? "🔒 " : "# ") + c.name;
    $("#chan-topic").textContent = c.topic || "";
    const box = $("#messages");
    const tops = sorted((m) => m.channel === c.id && !m.thread && shown(m));
    const replies = new Map();
    for (const m of state.msgs.values()) {
      if (m.channel === c.id && m.thread && shown(m)) {
        if (!replies.has(m.thread)) replies.set(m.thread, []);
        replies.get(m.thread).push(m);
      }
    }
    for (const r of replies.values()) r.sort((a, b) => (a.id < b.id ? -1 : 1));
    stickToBottom(box, () => {
      box.replaceChildren();
      if (!tops.length) {
        const e = el("div", "empty");
        e.innerHTML = c.visibility === "dm"
          ? "This is your direct message with <b>Marlowe</b>. Everything you write here reaches it."
          : `This is the start of <b>${c.visibility === "private" ? "🔒" : "#"}${esc(c.name)}</b>. Try: type <b>@</b> and pick Marlowe, ask something, then switch person and reply in the thread.`;
        box.appendChild(e);
      }
      for (const m of tops) box.appendChild(msgView(m, { clickable: true, replies: replies.get(m.id), flash: true, where: "main" }));
    });
    if (tops.length) state.lastRead.set(c.id, tops[tops.length - 1].id);
  }

  function renderThread() {
    const pane = $("#thread");
    const root = state.thread && state.msgs.get(state.thread);
    if (!root || root.channel !== state.channel || !shown(root)) {
      pane.hidden = true;
      return;
    }
    pane.hidden = false;
    const c = channel(root.channel);
    $("#thread-chan").textContent = c.visibility === "dm" ? "Marlowe" : (c.visibility === "private" ? "🔒 " : "# ") + c.name;
    const box = $("#thread-messages");
    const replies = sorted((m) => m.thread === root.id && shown(m));
    stickToBottom(box, () => {
      box.replaceChildren();
      const r = msgView(root, { where: "thread-root" });
      r.classList.add("thread-root");
      box.appendChild(r);
      box.appendChild(el("div", "thread-count", replies.length + (replies.length === 1 ? " reply" : " replies")));
      for (const m of replies) box.appendChild(msgView(m, { flash: true, where: "thread" }));
    });
  }

  // The typing indicator of the conversations on screen, until it lapses
  // (the server says how long it has left) or the bot posts there.
  let typingTimer = null;
  function renderTyping() {
    const now = Date.now();
    state.typing = state.typing.filter((x) => x.until > now);
    const show = (id, thread) => {
      const box = $(id);
      const on = state.typing.some((x) => x.channel === state.channel && (x.thread || "") === thread);
      box.hidden = !on;
      box.textContent = on ? "Marlowe is thinking…" : "";
    };
    show("#typing-main", "");
    show("#typing-thread", state.thread || "\u0000");
    clearTimeout(typingTimer);
    if (state.typing.length) typingTimer = setTimeout(renderTyping, Math.min(...state.typing.map((x) => x.until)) - now + 20);
  }

  function render() {
    if (!state.ws) return;
    renderTyping();
    renderSidebar();
    renderMain();
    renderThread();
    mainComposer.refresh();
    threadComposer.refresh();
  }

  // ---- navigation ----
  function setMe(id) {
    state.me = id;
    localStorage.setItem("marlowe.me", id);
    const c = channel(state.channel);
    if (!canSee(c)) {
      // Keep DMs personal: being someone else opens their DM, not yours.
      setChannel(c && c.visibility === "dm" ? "dm-" + id : "general");
    }
    renderPeople();
    render();
  }
  // Narrow screens: the channel list is a drawer.
  function setNav(open) {
    document.body.classList.toggle("nav-open", open);
    $("#backdrop").hidden = !open;
    $("#menu-btn").setAttribute("aria-expanded", String(open));
  }
  $("#menu-btn").onclick = () => setNav(!document.body.classList.contains("nav-open"));
  $("#backdrop").onclick = () => setNav(false);

  function setChannel(id) {
    setNav(false);
    if (state.channel !== id) state.thread = null;
    state.channel = id;
    localStorage.setItem("marlowe.channel", id);
    render();
  }
  function openThread(id) {
    state.thread = id;
    render();
    threadComposer.focus();
  }
  $("#thread-close").onclick = () => { state.thread = null; render(); };

  document.addEventListener("click", (e) => {
    const btn = e.target.closest(".card-actions button");
    if (btn) {
      e.stopPropagation();
      clickCard(btn.dataset.msg, btn.dataset.action);
      return;
    }
    const row = e.target.closest("#messages .msg.clickable");
    if (row && !e.target.closest("a, button, .card") && !window.getSelection().toString()) openThread(row.dataset.id);
  });

  // ---- API ----
  async function api(path, body) {
    const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok) {
      let msg = res.statusText;
      try { msg = (await res.json()).error || msg; } catch (_) { /* not JSON */ }
      throw new Error(msg);
    }
    return res.json();
  }

  async function clickCard(msgID, action) {
    const m = state.msgs.get(msgID);
    if (!m) return;
    const me = state.me, key = me + "|" + msgID;
    state.clicked.set(key, m.rev);
    state.clickErr.delete(key);
    schedule();
    try {
      await api("/api/click", { person: me, message: msgID, action });
    } catch (err) {
      state.clicked.delete(key);
      state.clickErr.set(key, "Click failed: " + err.message);
      schedule();
    }
  }

  // ---- composer with @-mention autocomplete ----
  function entities() {
    const out = [{ key: state.ws.bot.name, token: `<@${state.ws.bot.id}>`, label: state.ws.bot.name, sub: "AI teammate · app", who: state.ws.bot }];
    for (const p of state.ws.people) {
      if (p.id === state.me) continue;
      out.push({ key: p.name, token: `<@${p.id}>`, label: p.name, sub: p.title, who: p });
    }
    for (const g of state.ws.groups) out.push({ key: g.name, token: `<!subteam^${g.id}>`, label: g.name, sub: "group · " + g.members.map((id) => member(id).name).join(", "), glyph: "@" });
    const bsub = { here: "notify everyone online in this channel", channel: "notify everyone in this channel", everyone: "notify the whole workspace" };
    for (const b of state.ws.broadcasts) out.push({ key: b, token: `<!${b}>`, label: b, sub: bsub[b] || "broadcast", glyph: "!" });
    return out;
  }

  // toTokens turns "@Name" typed or picked in the composer into real
  // mention tokens, as a chat client does; the server resolves tokens by id.
  function toTokens(text) {
    const byKey = new Map();
    for (const e of entities()) byKey.set(e.key.toLowerCase(), e.token);
    const me = member(state.me);
    byKey.set(me.name.toLowerCase(), `<@${me.id}>`);
    return text.replace(/(^|[^\w@<])@([A-Za-z][\w.-]*)/g, (all, pre, name) => {
      let n = name, tail = "";
      while (n && !byKey.has(n.toLowerCase()) && /[.-]$/.test(n)) { tail = n.slice(-1) + tail; n = n.slice(0, -1); }
      const tok = byKey.get(n.toLowerCase());
      return tok ? pre + tok + tail : all;
    });
  }

  function makeComposer(host, target) {
    host.replaceChildren();
    const ac = el("div", "ac");
    ac.hidden = true;
    const box = el("div", "box");
    const ta = el("textarea");
    ta.rows = 1;
    const bar = el("div", "bar");
    const as = el("span", "as");
    const send = el("button", "send", "Send");
    const err = el("div", "err");
    bar.append(as, send);
    box.append(ta, bar);
    host.append(ac, box, err);
    let items = [], sel = 0, range = null;

    function placeholder() {
      const t = target();
      if (!t) return "";
      const c = channel(t.channel);
      const where = t.thread ? "Reply in thread" : c.visibility === "dm" ? "Message Marlowe" : `Message ${c.visibility === "private" ? "🔒" : "#"}${c.name}`;
      return `${where} as ${member(state.me).name} — type @ to mention`;
    }
    // Drafts are kept per conversation, as chat clients do.
    const drafts = new Map();
    let draftKey = null;
    function refresh() {
      const t = target();
      const key = t ? state.me + "@" + t.channel + "/" + (t.thread || "") : null;
      if (key !== draftKey) {
        if (draftKey !== null) drafts.set(draftKey, ta.value);
        ta.value = (key && drafts.get(key)) || "";
        draftKey = key;
        closeAC();
        autosize();
      }
      ta.placeholder = placeholder();
      as.innerHTML = `Posting as <b>${esc(member(state.me).name)}</b>`;
      as.title = "Enter sends, Shift+Enter starts a new line, @ mentions";
      send.disabled = !ta.value.trim();
    }
    function closeAC() { ac.hidden = true; items = []; range = null; }
    function showAC() {
      ac.replaceChildren(el("div", "ac-head", "People, apps and groups"));
      items.forEach((it, i) => {
        const row = el("div", "ac-item" + (i === sel ? " sel" : ""));
        row.dataset.key = it.key;
        row.appendChild(it.who ? avatar(it.who) : el("span", "ac-glyph", it.glyph));
        row.appendChild(el("span", "label", (it.glyph === "!" ? "@" : "") + it.label));
        row.appendChild(el("span", "sub", it.sub));
        row.onmousedown = (e) => { e.preventDefault(); pick(i); };
        ac.appendChild(row);
      });
      ac.hidden = false;
    }
    function update() {
      refresh();
      const caret = ta.selectionStart;
      const m = /(^|\s)@([\w.-]*)$/.exec(ta.value.slice(0, caret));
      if (!m) return closeAC();
      const q = m[2].toLowerCase();
      items = entities().filter((e) => e.key.toLowerCase().startsWith(q)).slice(0, 8);
      if (!items.length) return closeAC();
      range = [caret - m[2].length - 1, caret];
      sel = Math.min(sel, items.length - 1);
      showAC();
    }
    function pick(i) {
      const it = items[i];
      if (!it || !range) return;
      const ins = "@" + it.key + " ";
      ta.value = ta.value.slice(0, range[0]) + ins + ta.value.slice(range[1]);
      const pos = range[0] + ins.length;
      ta.setSelectionRange(pos, pos);
      closeAC();
      refresh();
      ta.focus();
    }
    async function submit() {
      const text = ta.value.trim();
      const t = target();
      if (!text || !t) return;
      send.disabled = true;
      err.textContent = "";
      const sentFrom = draftKey;
      try {
        await api("/api/messages", { person: state.me, channel: t.channel, thread: t.thread || "", text: toTokens(text) });
        if (draftKey === sentFrom) {
          ta.value = "";
          autosize();
        }
        drafts.delete(sentFrom);
      } catch (e) {
        err.textContent = e.message;
      }
      refresh();
    }
    function autosize() { ta.style.height = "auto"; ta.style.height = Math.min(ta.scrollHeight, 160) + "px"; }
    ta.addEventListener("input", () => { sel = 0; update(); autosize(); });
    ta.addEventListener("click", update);
    ta.addEventListener("blur", () => setTimeout(() => { if (document.activeElement !== ta) closeAC(); }, 100));
    // swallow: a key handled on keydown must not also insert its character
    // (some input paths deliver it separately from the keydown).
    let swallow = false;
    ta.addEventListener("keydown", (e) => {
      swallow = false;
      if (!ac.hidden && items.length) {
        if (e.key === "ArrowDown") { sel = (sel + 1) % items.length; showAC(); e.preventDefault(); return; }
        if (e.key === "ArrowUp") { sel = (sel + items.length - 1) % items.length; showAC(); e.preventDefault(); return; }
        if (e.key === "Enter" || e.key === "Tab") { pick(sel); swallow = true; e.preventDefault(); return; }
        if (e.key === "Escape") { closeAC(); e.preventDefault(); return; }
      }
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { swallow = true; e.preventDefault(); submit(); }
    });
    ta.addEventListener("beforeinput", (e) => {
      if (swallow && (e.inputType === "insertLineBreak" || e.inputType === "insertParagraph" || (e.inputType === "insertText" && /^[\r\n\t]$/.test(e.data || "")))) {
        e.preventDefault();
      }
      swallow = false;
    });
    ta.addEventListener("keyup", () => { swallow = false; });
    send.onclick = submit;
    return { refresh, focus: () => ta.focus() };
  }

  const mainComposer = makeComposer($("#composer-main"), () => ({ channel: state.channel, thread: "" }));
  const threadComposer = makeComposer($("#composer-thread"), () => (state.thread ? { channel: state.channel, thread: state.thread } : null));

  // ---- live updates ----
  let es = null;
  function setConn(live) {
    const c = $("#conn");
    c.textContent = live ? "● live" : "reconnecting…";
    c.classList.toggle("live", live);
  }
  function connect() {
    es = new EventSource("/api/events");
    es.addEventListener("hello", (e) => {
      const h = JSON.parse(e.data);
      if (state.epoch && h.epoch !== state.epoch) {
        // The workspace started over (an in-memory sandbox restarted): drop
        // what we had and load everything afresh.
        state.epoch = h.epoch;
        state.msgs.clear();
        state.thread = null;
        state.baseline = null;
        es.close();
        connect();
        schedule();
        return;
      }
      state.epoch = h.epoch;
      if (state.baseline === null) state.baseline = h.seq;
      setConn(true);
    });
    es.addEventListener("message", (e) => {
      const m = JSON.parse(e.data);
      const old = state.msgs.get(m.id);
      if (!old || old.rev < m.rev) state.msgs.set(m.id, m);
      schedule();
    });
    es.addEventListener("typing", (e) => {
      const now = Date.now();
      state.typing = JSON.parse(e.data).map((x) => ({ channel: x.channel, thread: x.thread || "", until: now + x.ms }));
      schedule();
    });
    es.onerror = () => setConn(false);
  }

  // A permalink (#c=<channel>&t=<message>, from `status` and `approvals`)
  // opens that channel and thread.
  function followLink() {
    const h = new URLSearchParams(location.hash.slice(1));
    const c = h.get("c");
    if (!c || !state.ws || !canSee(channel(c))) return false;
    state.channel = c;
    state.thread = h.get("t") || null;
    return true;
  }
  window.addEventListener("hashchange", () => { if (followLink()) render(); });

  async function start() {
    const res = await fetch("/api/workspace");
    state.ws = await res.json();
    state.epoch = state.ws.epoch;
    if (!state.ws.people.some((p) => p.id === state.me)) state.me = state.ws.people[0].id;
    followLink();
    if (!canSee(channel(state.channel))) state.channel = "general";
    renderPeople();
    render();
    connect();
    mainComposer.focus();
  }
  start();
})();
