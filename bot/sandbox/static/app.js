// The sandbox page: renders what the Slack stand-in holds, and turns clicks and commands into
// requests the sandbox signs and sends to the bot. Polls /ui/state once a second.
"use strict";

const POLL_MS = 1000;

const ui = {
  user: null,          // acting user id
  channel: "C0APPROVALS",
  state: null,
  rendered: {},        // part -> JSON last rendered, so an unchanged part is left alone
  modalId: null,
};

// -- text -----------------------------------------------------------------------------

// Drawn with glyphs every system font has (DejaVu on a bare Debian), coloured like the
// emoji they stand for, so a card reads the same in any browser and in the README's screenshots.
const EMOJI = {
  white_check_mark: ["\u2714", "ok"], heavy_check_mark: ["\u2714", "ok"], x: ["\u2716", "bad"],
  warning: ["\u26a0", "warn"], hourglass: ["\u25f7", "warn"], hourglass_flowing_sand: ["\u25f7", "warn"],
  double_vertical_bar: ["\u2016", "info"], arrow_forward: ["\u25b6", "info"],
  no_entry_sign: ["\u2298", "bad"], no_entry: ["\u2298", "bad"], scissors: ["\u2702", "info"],
  arrows_counterclockwise: ["\u21bb", "info"], information_source: ["\u2139", "info"],
  email: ["\u2709", "info"], star: ["\u2605", "warn"], triangular_flag_on_post: ["\u2691", "bad"],
  slightly_smiling_face: ["\u263a", "warn"],
};

function emojiHtml(name) {
  const known = EMOJI[name];
  if (!known) return null;
  return `<span class="emoji ${known[1]}" title=":${esc(name)}:">${known[0]}</span>`;
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => (
    { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Slack escapes exactly these three in message text.
function decode(text) {
  return String(text).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function emoji(html) {
  return html.replace(/:([a-z0-9_+-]+):/g, (all, name) => emojiHtml(name) || all);
}

function personName(id) {
  const p = ui.state && ui.state.people.find((x) => x.id === id);
  return p ? p.name : id;
}

const ORDINAL = (n) => n + ({ 1: "st", 2: "nd", 3: "rd" }[n % 100 > 10 && n % 100 < 14 ? 0 : n % 10] || "th");

function dayWord(d) {
  const day = (x) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const diff = Math.round((day(d) - day(new Date())) / 86400000);
  return { 0: "today", [-1]: "yesterday", 1: "tomorrow" }[diff] || null;
}

// <!date^EPOCH^format|fallback>, in the reader's local time zone, as Slack shows it.
function slackDate(epoch, format) {
  const d = new Date(Number(epoch) * 1000);
  if (Number.isNaN(d.getTime())) return null;
  const month = (style) => d.toLocaleString(undefined, { month: style });
  const weekday = d.toLocaleString(undefined, { weekday: "long" });
  const dateLong = `${month("long")} ${ORDINAL(d.getDate())}, ${d.getFullYear()}`;
  const dateShort = `${month("short")} ${d.getDate()}, ${d.getFullYear()}`;
  const secs = Math.round((Date.now() - d.getTime()) / 1000);
  const ago = (() => {
    const a = Math.abs(secs);
    const [n, unit] = a < 60 ? [a, "second"] : a < 3600 ? [Math.round(a / 60), "minute"]
      : a < 86400 ? [Math.round(a / 3600), "hour"] : [Math.round(a / 86400), "day"];
    const words = `${n} ${unit}${n === 1 ? "" : "s"}`;
    return secs >= 0 ? `${words} ago` : `in ${words}`;
  })();
  const tokens = {
    date_num: `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`,
    date: dateLong,
    date_short: dateShort,
    date_long: `${weekday}, ${dateLong}`,
    date_pretty: dayWord(d) || dateLong,
    date_short_pretty: dayWord(d) || dateShort,
    date_long_pretty: dayWord(d) || `${weekday}, ${dateLong}`,
    time: d.toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" }),
    time_secs: d.toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" }),
    ago,
  };
  return format.replace(/\{(\w+)\}/g, (all, name) => (name in tokens ? tokens[name] : all));
}

// One <...> control sequence: mention, channel, special mention, date or link.
function control(inner) {
  const [target, ...rest] = inner.split("|");
  const label = rest.join("|");
  if (target.startsWith("@")) {
    return `<span class="mention">@${esc(label || personName(target.slice(1)))}</span>`;
  }
  if (target.startsWith("#")) {
    return `<span class="mention">#${esc(label || target.slice(1))}</span>`;
  }
  if (target.startsWith("!date^")) {
    const [, epoch, format] = target.split("^");
    const shown = slackDate(epoch, format || "{date_short} {time}");
    return `<time class="date" title="${esc(decode(label))}" data-epoch="${esc(epoch)}">${
      esc(shown === null ? decode(label) : shown)}</time>`;
  }
  if (target.startsWith("!")) {
    const word = target.slice(1).split("^")[0];
    return `<span class="mention">${esc(label || `@${word}`)}</span>`;
  }
  if (/^(https?:|mailto:)/i.test(target)) {
    const href = decode(target);
    return `<a href="${esc(href)}" target="_blank" rel="noopener noreferrer">${esc(decode(label || target))}</a>`;
  }
  return esc(decode(`<${inner}>`));
}

function inline(html) {
  return html
    .replace(/(^|[^\w*])\*(?!\s)([^*\n]+?)\*(?!\w)/g, "$1<b>$2</b>")
    .replace(/(^|[^\w_])_(?!\s)([^_\n]+?)_(?!\w)/g, "$1<i>$2</i>")
    .replace(/(^|[^\w~])~(?!\s)([^~\n]+?)~(?!\w)/g, "$1<s>$2</s>");
}

// Slack mrkdwn as HTML: *bold*, _italic_, ~strike~, `code`, ```pre```, > quotes, <@U>, <url|text>,
// <!date^...>, :emoji:, and the three entities. Everything else is text.
function mrkdwn(source) {
  const slots = [];
  const keep = (html) => `\u0000${slots.push(html) - 1}\u0000`;
  let s = String(source || "");
  s = s.replace(/```([\s\S]*?)```/g, (all, code) => keep(`<pre>${esc(decode(code.replace(/^\n/, "")))}</pre>`));
  s = s.replace(/`([^`\n]+)`/g, (all, code) => keep(`<code>${esc(decode(code))}</code>`));
  s = s.replace(/<([^<>\n]+)>/g, (all, inner) => keep(control(inner)));
  s = s.replace(/:([a-z0-9_+-]+):/g, (all, name) => (EMOJI[name] ? keep(emojiHtml(name)) : all));
  const lines = s.split("\n").map((line) => {
    const quote = line.startsWith(">");   // a literal '>' arrives as &gt;, so this is markup
    const html = inline(esc(decode(quote ? line.slice(1) : line)));
    return quote ? `<div class="quote">${html || "&nbsp;"}</div>` : `<div>${html || "&nbsp;"}</div>`;
  });
  return lines.join("").replace(/\u0000(\d+)\u0000/g, (all, i) => slots[Number(i)]);
}

function textObject(obj) {
  if (!obj) return "";
  if (obj.type === "mrkdwn") return mrkdwn(obj.text);
  return emoji(esc(obj.text || ""));
}

// -- Block Kit --------------------------------------------------------------------------

function el(tag, cls, html) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (html !== undefined) node.innerHTML = html;
  return node;
}

function button(element, where) {
  const b = el("button", `btn ${element.style || ""}`, textObject(element.text));
  b.type = "button";
  b.dataset.actionId = element.action_id || "";
  b.dataset.value = element.value || "";
  b.dataset.testid = "block-button";
  b.addEventListener("click", () => press(element, where));
  return b;
}

function richInline(item) {
  const style = item.style || {};
  let html;
  switch (item.type) {
    case "text": html = esc(item.text || "").replace(/\n/g, "<br>"); break;
    case "link": html = `<a href="${esc(item.url)}" target="_blank" rel="noopener noreferrer">${esc(item.text || item.url)}</a>`; break;
    case "user": html = `<span class="mention">@${esc(personName(item.user_id))}</span>`; break;
    case "channel": html = `<span class="mention">#${esc(item.channel_id)}</span>`; break;
    case "usergroup": html = `<span class="mention">@${esc(item.usergroup_id)}</span>`; break;
    case "broadcast": html = `<span class="mention">@${esc(item.range)}</span>`; break;
    // The glyphs this page draws come first, as in mrkdwn; then the code points Slack sent.
    case "emoji": html = emojiHtml(item.name) || (/^[0-9a-f]{1,6}(-[0-9a-f]{1,6})*$/i.test(item.unicode || "")
      ? item.unicode.split("-").map((h) => esc(String.fromCodePoint(Math.min(parseInt(h, 16), 0x10ffff)))).join("")
      : `:${esc(item.name)}:`); break;
    case "date": html = `<time class="date">${esc(slackDate(item.timestamp, item.format || "{date_short} {time}") || item.fallback || "")}</time>`; break;
    default: html = esc(item.text || "");
  }
  if (style.code) html = `<code>${html}</code>`;
  if (style.bold) html = `<b>${html}</b>`;
  if (style.italic) html = `<i>${html}</i>`;
  if (style.strike) html = `<s>${html}</s>`;
  return html;
}

function richElement(part) {
  const inner = (part.elements || []).map((x) => (x.type && x.type.startsWith("rich_text_") ? richElement(x) : richInline(x))).join("");
  switch (part.type) {
    case "rich_text_list": {
      const tag = part.style === "ordered" ? "ol" : "ul";
      const items = (part.elements || []).map((x) => `<li>${richElement(x)}</li>`).join("");
      return `<${tag} style="margin-left:${(part.indent || 0) * 1.2}em">${items}</${tag}>`;
    }
    case "rich_text_quote": return `<div class="quote">${inner}</div>`;
    case "rich_text_preformatted": return `<pre>${inner}</pre>`;
    default: return `<div>${inner}</div>`;   // each section is its own line, as in Slack
  }
}

function renderBlock(block, where) {
  const node = el("div", `block b-${block.type}`);
  node.dataset.blockId = block.block_id || "";
  switch (block.type) {
    case "header":
      node.innerHTML = textObject(block.text);
      break;
    case "section": {
      if (block.text) node.appendChild(el("div", "text", textObject(block.text)));
      if (block.fields) {
        const grid = el("div", "fields");
        block.fields.forEach((f) => grid.appendChild(el("div", "field", textObject(f))));
        node.appendChild(grid);
      }
      if (block.accessory && block.accessory.type === "button") {
        node.classList.add("with-accessory");
        node.appendChild(button(block.accessory, { ...where, block_id: block.block_id }));
      }
      break;
    }
    case "context":
      (block.elements || []).forEach((e) => node.appendChild(
        e.type === "image" ? el("span", "image-alt", `[${esc(e.alt_text || "image")}]`) : el("span", "", textObject(e))));
      break;
    case "divider":
      node.appendChild(el("hr"));
      break;
    case "actions":
      (block.elements || []).forEach((e) => node.appendChild(e.type === "button"
        ? button(e, { ...where, block_id: block.block_id })
        : el("span", "unsupported", `[${esc(e.type)}]`)));
      break;
    case "rich_text":
      node.innerHTML = (block.elements || []).map(richElement).join("");
      break;
    case "image":  // never fetched: nothing leaves this machine
      node.innerHTML = `<span class="image-alt">[image: ${esc(block.alt_text || "")}]</span>`;
      break;
    case "input": {
      node.appendChild(el("label", "input-label", textObject(block.label) + (block.optional ? ' <span class="muted">(optional)</span>' : "")));
      const e = block.element || {};
      const field = el(e.multiline ? "textarea" : "input", "input");
      field.name = `${block.block_id}\u0001${e.action_id}`;
      field.dataset.testid = "modal-input";
      if (e.placeholder) field.placeholder = e.placeholder.text;
      if (e.initial_value) field.value = e.initial_value;
      if (e.max_length) field.maxLength = e.max_length;
      node.appendChild(field);
      if (block.hint) node.appendChild(el("div", "muted small", textObject(block.hint)));
      break;
    }
    default:
      node.innerHTML = `<span class="unsupported">[${esc(block.type)} block]</span>`;
  }
  return node;
}

// -- messages ---------------------------------------------------------------------------

function clock(at) {
  return new Date(at * 1000).toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" });
}

function renderMessage(msg, { ephemeral = false } = {}) {
  const node = el("div", `message${ephemeral ? " ephemeral" : ""}`);
  node.dataset.testid = ephemeral ? "ephemeral" : "message";
  node.dataset.ts = msg.ts;
  node.appendChild(el("div", "avatar", "\u2714"));
  const body = el("div", "body");
  const who = ephemeral ? '<span class="only-you">Only visible to you</span>' : "";
  body.appendChild(el("div", "meta",
    `<b>signoff</b> <span class="tag">APP</span> <span class="muted">${esc(clock(msg.at || Number(msg.ts)))}</span>${
      msg.edits ? ' <span class="muted">(edited)</span>' : ""} ${who}`));
  const where = { channel: msg.channel, ts: msg.ts, ephemeral };
  const content = el("div", "content");
  if (msg.blocks && msg.blocks.length) {
    msg.blocks.forEach((b) => content.appendChild(renderBlock(b, where)));
  } else {
    content.innerHTML = mrkdwn(msg.text);
  }
  body.appendChild(content);
  node.appendChild(body);
  return node;
}

function renderThread(parent, ephemerals) {
  const mine = ephemerals.filter((e) => e.thread_ts === parent.ts);
  const items = [...parent.replies.map((m) => ({ m, eph: false })), ...mine.map((m) => ({ m, eph: true }))]
    .sort((a, b) => Number(a.m.ts) - Number(b.m.ts));
  if (!items.length) return null;
  const thread = el("div", "thread");
  thread.dataset.testid = "thread";
  thread.dataset.parent = parent.ts;
  const n = parent.replies.length;
  thread.appendChild(el("div", "thread-head", `Thread \u00b7 ${n} repl${n === 1 ? "y" : "ies"}`));
  items.forEach(({ m, eph }) => thread.appendChild(renderMessage(m, { ephemeral: eph })));
  return thread;
}

function renderMessages(state) {
  const box = document.getElementById("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const inChannel = (m) => m.channel === ui.channel;
  const tops = state.messages.filter(inChannel);
  const threaded = new Set(tops.map((m) => m.ts));
  const ephemerals = state.ephemerals.filter(inChannel);
  const rows = [
    ...tops.map((m) => ({ m, eph: false })),
    ...ephemerals.filter((e) => !e.thread_ts || !threaded.has(e.thread_ts)).map((m) => ({ m, eph: true })),
  ].sort((a, b) => Number(a.m.ts) - Number(b.m.ts));
  box.replaceChildren();
  if (!rows.length) {
    box.appendChild(el("div", "empty muted", "Nothing here yet. Type a command below."));
  }
  rows.forEach(({ m, eph }) => {
    box.appendChild(renderMessage(m, { ephemeral: eph }));
    if (!eph) {
      const thread = renderThread(m, ephemerals);
      if (thread) box.appendChild(thread);
    }
  });
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function renderChannels(state) {
  const lists = { channels: document.getElementById("channels"), dms: document.getElementById("dms") };
  lists.channels.replaceChildren();
  lists.dms.replaceChildren();
  state.channels.forEach((c) => {
    const count = state.messages.filter((m) => m.channel === c.id).length
      + state.ephemerals.filter((e) => e.channel === c.id).length;
    const li = el("li", c.id === ui.channel ? "active" : "",
      `${c.is_im ? "\u25cf " : "# "}${esc(c.name)}${count ? ` <span class="count">${count}</span>` : ""}`);
    li.dataset.testid = "channel";
    li.dataset.channel = c.id;
    li.addEventListener("click", () => { ui.channel = c.id; ui.rendered = {}; render(); });
    (c.is_im ? lists.dms : lists.channels).appendChild(li);
  });
  const current = state.channels.find((c) => c.id === ui.channel);
  document.getElementById("channel-name").textContent = current
    ? `${current.is_im ? "" : "#"}${current.name}` : ui.channel;
  document.getElementById("channel-hint").textContent = current && current.is_im
    ? "your direct messages with the bot" : "approval cards are posted here";
}

// The app's own example questions (App.examples): the placeholder, and hints that fill the box.
function renderExamples(examples) {
  const input = document.getElementById("command");
  input.placeholder = examples.length ? `/signoff ask ${examples[0]}` : "/signoff ask \u2026";
  const list = document.getElementById("examples");
  list.replaceChildren();
  examples.forEach((question) => {
    const code = el("code", "example", esc(`/signoff ask ${question}`));
    code.dataset.testid = "example";
    code.title = "put this in the box";
    code.addEventListener("click", () => { input.value = code.textContent; input.focus(); });
    list.append(code, ", ");
  });
}

function renderWorld(world) {
  const panel = document.getElementById("world-panel");
  panel.hidden = !world;
  if (!world) return;
  const body = document.getElementById("accounts");
  body.replaceChildren();
  world.accounts.forEach((a) => {
    const tr = el("tr");
    tr.dataset.account = a.name;
    tr.appendChild(el("td", "", esc(a.name)));
    const select = el("select");
    select.dataset.testid = "crm-tier";
    select.dataset.account = a.name;
    world.tiers.forEach((t) => {
      const opt = el("option", "", esc(t));
      opt.value = t;
      opt.selected = t === a.discount_tier;
      select.appendChild(opt);
    });
    select.addEventListener("change", () => crm({ account: a.name, tier: select.value }));
    const tdTier = el("td");
    tdTier.appendChild(select);
    tr.appendChild(tdTier);
    const hold = el("input");
    hold.type = "checkbox";
    hold.checked = !!a.credit_hold;
    hold.dataset.testid = "crm-hold";
    hold.dataset.account = a.name;
    hold.addEventListener("change", () => crm({ account: a.name, credit_hold: hold.checked }));
    const tdHold = el("td");
    tdHold.appendChild(hold);
    tr.appendChild(tdHold);
    const sent = el("td", "num", String(a.quotes_sent));
    sent.dataset.testid = "quotes-sent";
    sent.dataset.account = a.name;
    tr.appendChild(sent);
    body.appendChild(tr);
  });
  document.getElementById("quotes-total").textContent = String(world.quotes_sent);
}

function renderModal(view) {
  const overlay = document.getElementById("modal-overlay");
  if (!view) {
    overlay.hidden = true;
    ui.modalId = null;
    return;
  }
  if (ui.modalId === view.id) return;   // keep what was typed
  ui.modalId = view.id;
  const form = document.getElementById("modal");
  form.replaceChildren();
  form.dataset.viewId = view.id;
  form.dataset.callbackId = view.callback_id || "";
  form.appendChild(el("div", "modal-title", textObject(view.title)));
  (view.blocks || []).forEach((b) => form.appendChild(renderBlock(b, { view: view.id })));
  form.appendChild(el("div", "modal-error", ""));
  const row = el("div", "modal-buttons");
  const cancel = el("button", "btn", textObject(view.close || { type: "plain_text", text: "Cancel" }));
  cancel.type = "button";
  cancel.dataset.testid = "modal-cancel";
  cancel.addEventListener("click", () => dismissModal(view.id));
  row.appendChild(cancel);
  if (view.submit) {
    const ok = el("button", "btn primary", textObject(view.submit));
    ok.type = "submit";
    ok.dataset.testid = "modal-submit";
    row.appendChild(ok);
  }
  form.appendChild(row);
  overlay.hidden = false;
  const first = form.querySelector("textarea, input");
  if (first) first.focus();
}

function changed(part, value) {
  const json = JSON.stringify(value);
  if (ui.rendered[part] === json) return false;
  ui.rendered[part] = json;
  return true;
}

function render() {
  const state = ui.state;
  if (!state) return;
  document.querySelector("[data-testid=app-ref]").textContent = state.app;
  const picker = document.getElementById("acting-user");
  if (changed("people", state.people)) {
    picker.replaceChildren(...state.people.map((p) => {
      const opt = el("option", "", esc(p.label));
      opt.value = p.id;
      return opt;
    }));
  }
  picker.value = ui.user;
  if (!state.channels.some((c) => c.id === ui.channel)) ui.channel = state.channels[0].id;
  if (changed("channels", [state.channels, state.messages.length, state.ephemerals.length, ui.channel])) {
    renderChannels(state);
  }
  if (changed("messages", [state.messages, state.ephemerals, ui.channel, ui.user])) renderMessages(state);
  if (changed("world", state.world)) renderWorld(state.world);
  if (changed("examples", state.examples)) renderExamples(state.examples);
  renderModal(state.modal);
}

// -- talking to the sandbox ---------------------------------------------------------------

function log(what, answer) {
  const list = document.getElementById("log");
  const ok = answer && answer.status === 200;
  const li = el("li", ok ? "ok" : "bad",
    `<span class="muted">${esc(new Date().toLocaleTimeString())}</span> ${esc(what)} \u2192 ${
      esc(answer ? answer.status : "no answer")}`);
  li.dataset.testid = "log-entry";
  list.prepend(li);
  while (list.children.length > 30) list.lastChild.remove();
}

// The sandbox answers /ui/* only with the token it served this page with.
const TOKEN = { "X-Sandbox-Token": document.querySelector('meta[name="signoff-sandbox-token"]').content };

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { ...TOKEN, "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) return { status: res.status, body: text };
  return JSON.parse(text);
}

async function refresh() {
  try {
    const res = await fetch(`/ui/state?user=${encodeURIComponent(ui.user || "")}`, { cache: "no-store", headers: TOKEN });
    if (res.ok) {
      ui.state = await res.json();
      if (!ui.user) ui.user = ui.state.user;
      document.body.dataset.ready = "1";
      render();
    }
  } catch (err) {
    // The sandbox stopped or is restarting; keep polling.
  }
}

function askConfirm(confirm) {
  return new Promise((resolve) => {
    const overlay = document.getElementById("confirm-overlay");
    const box = document.getElementById("confirm");
    box.replaceChildren(el("div", "modal-title", textObject(confirm.title)), el("div", "text", textObject(confirm.text)));
    const row = el("div", "modal-buttons");
    const deny = el("button", "btn", textObject(confirm.deny || { type: "plain_text", text: "Cancel" }));
    const ok = el("button", `btn ${confirm.style || "primary"}`, textObject(confirm.confirm || { type: "plain_text", text: "Yes" }));
    ok.dataset.testid = "confirm-ok";
    const done = (answer) => { overlay.hidden = true; resolve(answer); };
    deny.addEventListener("click", () => done(false));
    ok.addEventListener("click", () => done(true));
    row.append(deny, ok);
    box.appendChild(row);
    overlay.hidden = false;
  });
}

async function press(element, where) {
  if (where.view) return;   // buttons inside modals are not wired in the sandbox
  if (element.confirm && !(await askConfirm(element.confirm))) return;
  const answer = await post("/ui/click", {
    user: ui.user, channel: where.channel, ts: where.ts, ephemeral: where.ephemeral,
    action_id: element.action_id, block_id: where.block_id, value: element.value || "",
  });
  log(`block_actions ${element.action_id}`, answer);
  refresh();
}

async function crm(change) {
  const answer = await post("/ui/crm", change);
  log(`CRM ${change.account}: ${"tier" in change ? `tier ${change.tier}` : `credit hold ${change.credit_hold ? "on" : "off"}`}`, answer.ok ? { status: 200 } : answer);
  refresh();
}

async function dismissModal(viewId) {
  await post("/ui/dismiss", { view_id: viewId });
  refresh();
}

document.getElementById("modal").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const values = {};
  form.querySelectorAll("textarea, input").forEach((field) => {
    const [block, action] = field.name.split("\u0001");
    values[block] = { ...(values[block] || {}), [action]: field.value };
  });
  const answer = await post("/ui/submit", { user: ui.user, view_id: form.dataset.viewId, values });
  log(`view_submission ${form.dataset.callbackId}`, answer);
  const body = answer.body;
  if (body && body.response_action === "errors") {
    form.querySelector(".modal-error").textContent = Object.values(body.errors || {}).join(" ");
  }
  refresh();
});

document.getElementById("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("command");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  const answer = await post("/ui/command", { user: ui.user, channel: ui.channel, text });
  log(`/signoff ${text.replace(/^\/\S+\s*/, "")}`, answer);
  refresh();
});

document.getElementById("acting-user").addEventListener("change", (event) => {
  ui.user = event.target.value;
  ui.rendered = {};
  ui.modalId = null;
  refresh();
});

refresh();
setInterval(refresh, POLL_MS);
