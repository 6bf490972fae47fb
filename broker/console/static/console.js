// The web console: plain ES module, no build step. Pages are rendered from the JSON of
// /console/api/ and refreshed every few seconds while shown; a page's forms are drawn once
// and stay while the figures around them refresh. A control that changes something is
// drawn only when the principal may do it (the broker refuses anything else anyway).
const main = document.getElementById("main");
const who = document.getElementById("who");
const notice = document.getElementById("notice");
const statusLine = document.getElementById("status");
const REFRESH_MS = 2000;
let timer = null;

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const enc = encodeURIComponent;

async function api(path, options = {}) {
  const init = {credentials: "same-origin", ...options};
  if (options.json !== undefined) {
    init.body = JSON.stringify(options.json);
    init.headers = {"Content-Type": "application/json"};
  }
  const response = await fetch("/console/api/" + path, init);
  const body = await response.json().catch(() => ({error: `${response.status} ${response.statusText}`}));
  if (response.status === 401 && path !== "login") { showLogin(); throw new Error("log in first"); }
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function chart(points, keys, label) {
  const w = 560, h = 120;
  if (points.length < 2) return `<p>${esc(label)}: collecting…</p>`;
  const max = Math.max(1, ...points.flatMap((p) => keys.map((k) => p[k])));
  const t0 = points[0].time, span = Math.max(1, points[points.length - 1].time - t0);
  const colors = ["#1f6feb", "#d1242f", "#2da44e"];
  const lines = keys.map((k, i) => `<polyline fill="none" stroke="${colors[i]}" stroke-width="2" points="${
    points.map((p) => `${((p.time - t0) / span * w).toFixed(1)},${(h - p[k] / max * h).toFixed(1)}`).join(" ")}"/>`).join("");
  const last = points[points.length - 1];
  const legend = keys.map((k, i) => `<span style="color:${colors[i]}">${esc(k)} ${last[k].toFixed(1)}</span>`).join(" · ");
  return `<figure><svg class="chart" role="img" aria-label="${esc(label)}" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">${lines}</svg><figcaption>${esc(label)} over the last ${Math.round(span)} s (max ${max.toFixed(1)}): ${legend}</figcaption></figure>`;
}

function table(headers, rows, caption = "") {
  return `<table>${caption ? `<caption>${esc(caption)}</caption>` : ""}<thead><tr>${headers.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>${
    rows.length ? rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")
      : `<tr><td colspan="${headers.length}"><em>none</em></td></tr>`}</tbody></table>`;
}

function shown(v) {
  if (v === null || v === undefined) return "<em>null</em>";
  return v.format === "hex" ? `<pre class="hex">${esc(v.text)}</pre>` : `<pre>${esc(v.text)}</pre>`;
}

function transaction(t) {
  if (!t) return '<span class="muted">no</span>';
  return `<span class="txn txn-${esc(t.state ?? "unknown")}">${esc(t.state ?? "unknown")}</span> <span class="muted">producer ${esc(t.producer_id)}</span>`;
}

function fail(error) {
  notice.textContent = error.message;
  notice.hidden = false;
}

function say(text) { statusLine.textContent = text; }

// Draws a page whose frame (headings, forms) stays while its live part is redrawn: the
// first call per route draws `frame` (holding the LIVE element) and `wire`s its forms.
const LIVE = '<div id="live"></div>';
function layout(key, frame, wire) {
  if (main.dataset.page !== key) {
    main.dataset.page = key;
    main.innerHTML = frame;
    wire?.();
  }
  return document.getElementById("live");
}

// Submits `form` through `act(data, submitter)`; a refusal is shown in the page.
function onSubmit(id, act) {
  const form = document.getElementById(id);
  if (form) form.onsubmit = async (e) => {
    e.preventDefault();
    try { await act(new FormData(form), e.submitter); } catch (err) { fail(err); }
  };
}

const field = (label, name, attrs = "") => `<label>${esc(label)} <input name="${name}" ${attrs}></label>`;
const options = (values, selected) => values.map((v) => `<option${v === selected ? " selected" : ""}>${esc(v)}</option>`).join("");

const pages = {
  async overview() {
    const o = await api("overview");
    const p = o.partitions;
    const live = layout("overview", "<h1>Overview</h1>" + LIVE);
    live.innerHTML = `<p>Cluster ${esc(o.cluster_id)}, controller ${esc(o.controller)}; ${esc(p.total)} partitions,
        <span class="${p.under_replicated ? "bad" : ""}">${esc(p.under_replicated)} under-replicated</span>,
        <span class="${p.offline ? "bad" : ""}">${esc(p.offline)} offline</span></p>
      <div class="columns"><section><h2>Brokers</h2>${table(["Node", "Host", "Port", "Rack", "Up since", "Leaders"], o.brokers.map((b) => [
        esc(b.node_id), esc(b.host), esc(b.port), esc(b.rack ?? "-"),
        b.up_since ? esc(new Date(b.up_since * 1000).toLocaleString()) : "-", esc(b.leaders)]))}
      <h2>Throughput</h2>${chart(o.throughput, ["bytes_in", "bytes_out"], "bytes per second")}</section>
      <section><h2>Requests</h2>${table(["API", "Requests/s (1 min)", "p99 ms"], o.requests.map((r) => [
        esc(r.api), esc(r.rate), r.p99_ms == null ? "-" : esc(r.p99_ms.toFixed(1))]))}</section></div>`;
  },
  async topics() {
    const t = await api("topics");
    const create = t.permissions.create_topics ? `<form id="create" aria-label="Create a topic">
      ${field("Name", "name", "required")}${field("Partitions", "partitions", 'type="number" min="1" value="1"')}
      <button>Create topic</button></form>` : "";
    const live = layout("topics", `<h1>Topics</h1>${create}${LIVE}`, () => onSubmit("create", async (d) => {
      await api("topics", {method: "POST", json: {name: d.get("name"), partitions: d.get("partitions")}});
      location.hash = "#/topic/" + enc(d.get("name"));
    }));
    live.innerHTML = table(["Topic", "Partitions", "Size (bytes)", "Messages/s", "Retention ms", "Cleanup policy"],
      t.topics.map((x) => [`<a href="#/topic/${enc(x.name)}">${esc(x.name)}</a>`, esc(x.partitions), esc(x.size),
        esc(x.messages_per_s.toFixed(2)), esc(x.configs["retention.ms"] ?? "?"), esc(x.configs["cleanup.policy"] ?? "?")]));
  },
  async topic(name) {
    const t = await api("topics/" + enc(name));
    const p = t.permissions;
    const forms = [
      p.alter_configs ? `<form id="config" aria-label="Set a config"><datalist id="config-names">${Object.keys(t.configs).map((k) => `<option value="${esc(k)}">`).join("")}</datalist>
        ${field("Config", "key", 'list="config-names" required')}${field("Value", "value", "required")}<button>Set config</button></form>` : "",
      p.alter ? `<form id="grow" aria-label="Add partitions">${field("Partitions in all", "count", `type="number" min="${t.partitions.length + 1}" value="${t.partitions.length + 1}"`)}<button>Add partitions</button></form>` : "",
      p.delete ? `<form id="delete" aria-label="Delete the topic">${field("Type the topic's name to delete it", "confirm", "required")}<button class="danger">Delete topic</button></form>` : "",
    ].join("");
    const configs = `<h2>Configs</h2>${table(["Name", "Value"], Object.entries(t.configs).map(([k, v]) => [esc(k), esc(v)]))}`;
    const live = layout("topic/" + name, `<h1>Topic ${esc(name)}</h1><p><a href="#/messages/${enc(name)}">Browse messages</a></p>
      <div class="columns"><section><h2>Partitions</h2>${LIVE}${forms ? `<h2>Change</h2>${forms}` : ""}</section><section>${configs}</section></div>`, () => {
        onSubmit("config", async (d) => { await api(`topics/${enc(name)}/configs`, {method: "POST", json: {set: {[d.get("key")]: d.get("value")}}}); await route(); say(`set ${d.get("key")}`); });
        onSubmit("grow", async (d) => { await api(`topics/${enc(name)}/partitions`, {method: "POST", json: {count: d.get("count")}}); await route(); say("partitions added"); });
        onSubmit("delete", async (d) => { await api(`topics/${enc(name)}?confirm=${enc(d.get("confirm"))}`, {method: "DELETE"}); location.hash = "#/topics"; say(`deleted ${name}`); });
      });
    live.innerHTML = table(["Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset"], t.partitions.map((x) => [
      esc(x.partition), esc(x.leader), esc(x.replicas.join(",")), esc(x.isr.join(",")), esc(x.start_offset), esc(x.end_offset)]));
  },
  async messages(name) {
    const t = await api("topics/" + enc(name));
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    const partition = params.get("partition") || "0";
    const ts = Number(params.get("timestamp") || NaN);  // shown in local time
    const at = Number.isFinite(ts) ? new Date(ts - new Date(ts).getTimezoneOffset() * 60000).toISOString().slice(0, 16) : "";
    main.innerHTML = `<h1>Messages of ${esc(name)}</h1><p><a href="#/topic/${enc(name)}">Topic ${esc(name)}: partitions and configs</a></p>
      <form id="browse" aria-label="Browse messages">
        <label>Partition <select name="partition">${options(t.partitions.map((x) => String(x.partition)), partition)}</select></label>
        ${field("From offset", "offset", `type="number" min="0" value="${esc(params.get("offset") || "")}"`)}
        ${field("From time", "time", `type="datetime-local" value="${esc(at)}"`)}
        <label>Order <select name="order"><option value="newest">newest first</option><option value="oldest" ${params.get("order") === "oldest" ? "selected" : ""}>oldest first</option></select></label>
        ${field("Key or value contains", "contains", `value="${esc(params.get("contains") || "")}"`)}
        <button>Show</button></form>
      ${t.permissions.write ? `<form id="produce" aria-label="Produce a test message">
        ${field("Key", "key")}${field("Value", "value", "required")}${field("Header (k=v)", "header")}<button>Produce</button></form>` : ""}
      <div id="records">Loading…</div>`;
    onSubmit("browse", (d) => {
      const time = d.get("time");
      d.delete("time");
      if (time) d.set("timestamp", String(new Date(time).getTime()));
      const q = new URLSearchParams([...d].filter(([, v]) => v !== ""));
      location.hash = `#/messages/${enc(name)}?${q}`;
    });
    onSubmit("produce", async (d) => {
      const [hk, ...hv] = String(d.get("header") || "").split("=");
      const r = await api(`topics/${enc(name)}/messages`, {method: "POST", json: {
        partition: partition, key: d.get("key"), value: d.get("value"),
        headers: hk ? [{key: hk, value: hv.join("=")}] : []}});
      await route();
      say(`produced at offset ${r.offset}`);
    });
    const box = document.getElementById("records");
    try {
      const r = await api(`topics/${enc(name)}/messages?${params}`);
      box.innerHTML = `<p>Partition ${esc(r.partition)}: offsets ${esc(r.start_offset)} to ${esc(r.end_offset)}, last stable offset ${esc(r.last_stable_offset)}</p>` +
        table(["Offset", "Timestamp", "Key", "Value", "Headers", "Transaction"], r.records.map((m) => [esc(m.offset),
          esc(new Date(m.timestamp).toISOString()), shown(m.key), shown(m.value),
          m.headers.map((h) => `${esc(h.key)}: ${shown(h.value)}`).join(""), transaction(m.transaction)]));
    } catch (err) { box.innerHTML = `<p class="error" role="alert">${esc(err.message)}</p>`; }
    return false;
  },
  async groups() {
    const g = await api("groups");
    layout("groups", "<h1>Consumer groups</h1>" + LIVE).innerHTML = table(["Group", "State", "Protocol type"], g.groups.map((x) => [
      `<a href="#/group/${enc(x.group_id)}">${esc(x.group_id)}</a>`, esc(x.state ?? "-"), esc(x.protocol_type ?? "-")]));
  },
  async group(id) {
    const g = await api("groups/" + enc(id));
    const p = g.permissions;
    const topics = [...new Set(g.offsets.map((o) => o.topic))];
    const forms = (p.reset ? `<form id="reset" aria-label="Reset offsets"><datalist id="group-topics">${topics.map((x) => `<option value="${esc(x)}">`).join("")}</datalist>
          ${field("Topic", "topic", `list="group-topics" required value="${esc(topics.length === 1 ? topics[0] : "")}"`)}
          <label>Reset to <select name="to"><option value="earliest">earliest</option><option value="latest">latest</option><option value="offset">offset</option></select></label>
          ${field("Offset", "offset", 'type="number" min="0"')}<button>Reset offsets</button></form>` : "") +
      (p.delete ? `<form id="delete-group" aria-label="Delete the group">${field("Type the group's id to delete it", "confirm", "required")}<button class="danger">Delete group</button></form>` : "");
    const live = layout("group/" + id, `<h1>Group ${esc(id)}</h1>${LIVE}${forms ? `<h2>Change</h2>${forms}` : ""}`, () => {
      onSubmit("reset", async (d) => {
        await api(`groups/${enc(id)}/reset`, {method: "POST", json: {topic: d.get("topic"), to: d.get("to"), offset: d.get("offset")}});
        say("offsets reset");
      });
      onSubmit("delete-group", async (d) => {
        if (d.get("confirm") !== id) throw new Error("type the group's id to confirm");
        await api(`groups/${enc(id)}`, {method: "DELETE"}); location.hash = "#/groups"; say(`deleted group ${id}`);
      });
    });
    live.innerHTML = `<p>State ${esc(g.state)}, protocol ${esc(g.protocol_type || "-")}${g.protocol ? "/" + esc(g.protocol) : ""}, total lag <output id="lag">${esc(g.total_lag)}</output></p>
      ${chart(g.lag_history, ["lag"], "total lag")}
      <div class="columns"><section><h2>Members</h2>${table(["Member", "Client", "Host", "Assignment"], g.members.map((m) => [esc(m.member_id), esc(m.client_id), esc(m.host),
        esc(m.assignment.map((a) => `${a.topic}: ${a.partitions.join(",")}`).join("; "))]))}</section>
      <section><h2>Offsets</h2>${table(["Topic", "Partition", "Committed", "Log end", "Lag"], g.offsets.map((o) => [
        esc(o.topic), esc(o.partition), esc(o.committed), esc(o.log_end), esc(o.lag)]))}</section></div>`;
  },
  async security() {
    const s = await api("security");
    const section = (title, part, headers, row) => `<h2>${esc(title)}</h2>` +
      (part.error ? `<p class="error">${esc(part.error)}</p>` : table(headers, part.rows.map(row)));
    const entity = (e) => Object.entries(e).map(([k, v]) => `${k}=${v ?? "<default>"}`).join(", ");
    main.innerHTML = `<h1>Security</h1>
      ${section("SCRAM users", s.users, ["User", "Mechanisms", ...(s.may_alter ? [""] : [])], (u) => [esc(u.user), esc(u.mechanisms.join(", ")),
        ...(s.may_alter ? [`<button class="danger" data-user="${esc(u.user)}" aria-label="Delete user ${esc(u.user)}">Delete</button>`] : [])])}
      ${s.may_alter ? `<form id="user" aria-label="Set a user's password">${field("User", "user", "required")}
        ${field("Password", "password", 'type="password" autocomplete="new-password" required')}
        <label>Mechanism <select name="mechanism">${options(["SCRAM-SHA-256", "SCRAM-SHA-512"])}</select></label><button>Set password</button></form>` : ""}
      ${section("ACLs", s.acls, ["Principal", "Permission", "Operation", "Resource", "Pattern", "Host"], (a) => [esc(a.principal),
        esc(a.permission_type), esc(a.operation), `${esc(a.resource_type)} ${esc(a.resource_name)}`, esc(a.pattern_type), esc(a.host)])}
      ${s.may_alter ? `<form id="acl" aria-label="Add an ACL">${field("Principal", "principal", 'placeholder="User:alice" required')}
        <label>Permission <select name="permission_type">${options(["ALLOW", "DENY"])}</select></label>
        <label>Operation <select name="operation">${options(["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALL"])}</select></label>
        <label>Resource type <select name="resource_type">${options(["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"])}</select></label>
        ${field("Resource name", "resource_name", 'value="*"')}
        <label>Pattern <select name="pattern_type">${options(["LITERAL", "PREFIXED"])}</select></label>
        <button name="add">Add ACL</button><button name="remove" value="1">Remove ACL</button></form>` : ""}
      ${section("Client quotas", s.quotas, ["Entity", "Quotas", ...(s.may_alter_quotas ? [""] : [])], (q) => [esc(entity(q.entity)),
        esc(Object.entries(q.values).map(([k, v]) => `${k}=${v}`).join(", ")),
        ...(s.may_alter_quotas ? [`<button data-entity="${esc(JSON.stringify(q.entity))}" aria-label="Edit the quotas of ${esc(entity(q.entity))}">Edit</button>`] : [])])}
      ${s.may_alter_quotas ? `<form id="quota" aria-label="Set a client quota">
        <label>Entity <select name="kind"><option value="user">user</option><option value="client-id">client id</option><option value="user+client-id">user and client id</option><option value="ip">ip</option></select></label>
        ${field("User (empty: default)", "user")}${field("Client id (empty: default)", "client-id")}${field("IP (empty: default)", "ip")}
        <label>Quota <select name="key">${options(["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate", "connection_creation_rate"])}</select></label>
        ${field("Value (empty: remove)", "value", 'inputmode="decimal"')}<button>Set quota</button></form>` : ""}`;
    const done = async (text) => { await route(); say(text); };
    onSubmit("user", async (d) => { await api("security/users", {method: "POST", json: Object.fromEntries(d)}); await done(`password of ${d.get("user")} set`); });
    onSubmit("acl", async (d, button) => {
      const r = await api(button?.name === "remove" ? "security/acls/remove" : "security/acls", {method: "POST", json: Object.fromEntries(d)});
      await done(button?.name === "remove" ? `${r.removed} ACL(s) removed` : "ACL added");
    });
    onSubmit("quota", async (d) => {
      const kinds = {user: ["user"], "client-id": ["client-id"], "user+client-id": ["user", "client-id"], ip: ["ip"]}[d.get("kind")];
      const entity = Object.fromEntries(kinds.map((k) => [k, d.get(k) || null]));
      await api("security/quotas", {method: "POST", json: {entity, key: d.get("key"), value: d.get("value")}});
      await done("quota set");
    });
    for (const button of main.querySelectorAll("button[data-user]")) button.onclick = async () => {
      const user = button.dataset.user;
      if (!confirm(`Delete the SCRAM user ${user}? It can no longer log in.`)) return;
      try { await api(`security/users/${enc(user)}?confirm=${enc(user)}`, {method: "DELETE"}); await done(`user ${user} deleted`); } catch (err) { fail(err); }
    };
    for (const button of main.querySelectorAll("button[data-entity]")) button.onclick = () => {
      const e = JSON.parse(button.dataset.entity), form = document.getElementById("quota");
      form.elements.kind.value = Object.keys(e).sort().join("+") === "client-id+user" ? "user+client-id" : Object.keys(e)[0];
      for (const k of ["user", "client-id", "ip"]) form.elements[k].value = e[k] ?? "";
      form.elements.value.focus();
    };
    return false;
  },
};

async function showLogin(message = "", user = "") {
  clearInterval(timer);
  main.dataset.page = "login";
  main.innerHTML = `<h1>Log in</h1><p>This cluster has SASL users: log in with a SCRAM user.</p>
    ${message ? `<p class="error" role="alert">${esc(message)}</p>` : ""}
    <form id="login" aria-label="Log in"><label>User <input name="username" autocomplete="username" value="${esc(user)}" required></label>
    <label>Password <input name="password" type="password" autocomplete="current-password" required></label><button>Log in</button></form>`;
  document.getElementById("login").onsubmit = async (e) => {
    e.preventDefault();
    const d = new FormData(e.target);
    try {
      await api("login", {method: "POST", json: {username: d.get("username"), password: d.get("password")}});
      await start();
    } catch (err) { showLogin(err.message, d.get("username")); }
  };
  document.querySelector("#login input[name=" + (user ? "password" : "username") + "]").focus();
}

// What has the keyboard focus inside the live part, to give it back after a redraw.
function focusKey() {
  const el = document.activeElement;
  if (!el || !main.contains(el)) return null;
  if (el.id) return "#" + CSS.escape(el.id);
  if (el.getAttribute("href")) return `[href="${CSS.escape(el.getAttribute("href"))}"]`;
  return null;
}

async function route() {
  clearInterval(timer);
  notice.hidden = true;
  say("");
  main.dataset.page = "";
  const [path] = location.hash.replace(/^#\//, "").split("?");
  const [page, ...rest] = path.split("/");
  const render = pages[page] || pages.overview;
  const arg = decodeURIComponent(rest.join("/"));
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#/" + (pages[page] ? page : "overview")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const once = async () => {
    const focused = focusKey();
    try {
      const result = await render(arg);
      if (focused) main.querySelector(focused)?.focus();
      return result;
    } catch (err) {
      if (err.message !== "log in first") { main.dataset.page = ""; main.innerHTML = ""; fail(err); }
      return false;
    }
  };
  // Pages drawn once (a query, forms between tables) return false; the others refresh live.
  if ((await once()) !== false) timer = setInterval(once, REFRESH_MS);
}

async function start() {
  const s = await fetch("/console/api/session").then((r) => r.json());
  if (s.login_required && !s.principal) return showLogin();
  who.innerHTML = `${esc(s.principal)}${s.login_required ? ' <button id="logout">Log out</button>' : ""}`;
  const out = document.getElementById("logout");
  if (out) out.onclick = async () => { await api("logout", {method: "POST"}); who.textContent = ""; showLogin(); };
  await route();
}

window.addEventListener("hashchange", () => { route(); main.focus({preventScroll: true}); });
start();
