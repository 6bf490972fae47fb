// The web console: plain ES module, no build step. Pages are rendered from the JSON of
// /console/api/ and refreshed every few seconds while shown.
const main = document.getElementById("main");
const who = document.getElementById("who");
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
  const body = await response.json().catch(() => ({error: "unreadable answer"}));
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
  return `<figure><svg class="chart" role="img" aria-label="${esc(label)}" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">${lines}</svg><figcaption>${esc(label)} (max ${max.toFixed(1)}): ${legend}</figcaption></figure>`;
}

function table(headers, rows) {
  return `<table><thead><tr>${headers.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>${
    rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

function shown(v) {
  if (v === null || v === undefined) return "<em>null</em>";
  return v.format === "hex" ? `<pre class="hex">${esc(v.text)}</pre>` : `<pre>${esc(v.text)}</pre>`;
}

function fail(error) { main.insertAdjacentHTML("afterbegin", `<p class="error" role="alert">${esc(error.message)}</p>`); }

const pages = {
  async overview() {
    const o = await api("overview");
    main.innerHTML = `<h1>Overview</h1><p>Cluster ${esc(o.cluster_id)}, controller ${esc(o.controller)}</p>
      <h2>Brokers</h2>${table(["Node", "Host", "Port", "Rack", "Up since", "Leaders"], o.brokers.map((b) => [
        esc(b.node_id), esc(b.host), esc(b.port), esc(b.rack ?? "-"),
        b.up_since ? esc(new Date(b.up_since * 1000).toLocaleString()) : "-", esc(b.leaders)]))}
      <h2>Throughput</h2>${chart(o.throughput, ["bytes_in", "bytes_out"], "bytes per second")}
      <h2>Requests</h2>${table(["API", "Requests/s (1 min)", "p99 ms"], o.requests.map((r) => [
        esc(r.api), esc(r.rate), r.p99_ms == null ? "-" : esc(r.p99_ms.toFixed(1))]))}`;
  },
  async topics() {
    const t = await api("topics");
    const create = t.permissions.create_topics ? `<form id="create" aria-label="Create a topic">
      <label>Name <input name="name" required></label>
      <label>Partitions <input name="partitions" type="number" min="1" value="1"></label>
      <button>Create topic</button></form>` : "";
    main.innerHTML = `<h1>Topics</h1>${create}${table(["Topic", "Partitions", "Size (bytes)", "Messages/s", "Retention ms", "Cleanup policy"],
      t.topics.map((x) => [`<a href="#/topic/${enc(x.name)}">${esc(x.name)}</a>`, esc(x.partitions), esc(x.size),
        esc(x.messages_per_s.toFixed(2)), esc(x.configs["retention.ms"] ?? "?"), esc(x.configs["cleanup.policy"] ?? "?")]))}`;
    const form = document.getElementById("create");
    if (form) form.onsubmit = async (e) => {
      e.preventDefault();
      const d = new FormData(form);
      try {
        await api("topics", {method: "POST", json: {name: d.get("name"), partitions: Number(d.get("partitions"))}});
        location.hash = "#/topic/" + enc(d.get("name"));
      } catch (err) { fail(err); }
    };
    return false;
  },
  async topic(name) {
    const t = await api("topics/" + enc(name));
    const p = t.permissions;
    main.innerHTML = `<h1>Topic ${esc(name)}</h1>
      <p><a href="#/messages/${enc(name)}">Browse messages</a></p>
      ${table(["Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset"], t.partitions.map((x) => [
        esc(x.partition), esc(x.leader), esc(x.replicas.join(",")), esc(x.isr.join(",")), esc(x.start_offset), esc(x.end_offset)]))}
      <h2>Configs</h2>${table(["Name", "Value"], Object.entries(t.configs).map(([k, v]) => [esc(k), esc(v)]))}
      ${p.alter_configs ? `<form id="config" aria-label="Set a config"><label>Config <input name="key" required></label>
        <label>Value <input name="value" required></label><button>Set config</button></form>` : ""}
      ${p.alter ? `<form id="grow" aria-label="Add partitions"><label>Partitions in all <input name="count" type="number" min="1" value="${t.partitions.length + 1}"></label><button>Add partitions</button></form>` : ""}
      ${p.delete ? `<form id="delete" aria-label="Delete the topic"><label>Type the topic's name to delete it <input name="confirm" required></label><button>Delete topic</button></form>` : ""}`;
    const on = (id, f) => { const form = document.getElementById(id); if (form) form.onsubmit = async (e) => {
      e.preventDefault(); try { await f(new FormData(form)); } catch (err) { fail(err); } }; };
    on("config", async (d) => { await api(`topics/${enc(name)}/configs`, {method: "POST", json: {set: {[d.get("key")]: d.get("value")}}}); route(); });
    on("grow", async (d) => { await api(`topics/${enc(name)}/partitions`, {method: "POST", json: {count: Number(d.get("count"))}}); route(); });
    on("delete", async (d) => { await api(`topics/${enc(name)}?confirm=${enc(d.get("confirm"))}`, {method: "DELETE"}); location.hash = "#/topics"; });
    return false;
  },
  async messages(name) {
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    main.innerHTML = `<h1>Messages of ${esc(name)}</h1>
      <form id="browse" aria-label="Browse messages">
        <label>Partition <input name="partition" type="number" min="0" value="${esc(params.get("partition") || 0)}"></label>
        <label>From offset <input name="offset" value="${esc(params.get("offset") || "")}"></label>
        <label>From time (ms) <input name="timestamp" value="${esc(params.get("timestamp") || "")}"></label>
        <label>Order <select name="order"><option value="newest">newest first</option><option value="oldest" ${params.get("order") === "oldest" ? "selected" : ""}>oldest first</option></select></label>
        <label>Key or value contains <input name="contains" value="${esc(params.get("contains") || "")}"></label>
        <button>Show</button></form>
      <form id="produce" aria-label="Produce a test message">
        <label>Key <input name="key"></label><label>Value <input name="value" required></label>
        <label>Header (k=v) <input name="header"></label><button>Produce</button></form>
      <div id="records">Loading…</div>`;
    document.getElementById("browse").onsubmit = (e) => {
      e.preventDefault();
      const q = new URLSearchParams([...new FormData(e.target)].filter(([, v]) => v !== ""));
      location.hash = `#/messages/${enc(name)}?${q}`;
    };
    document.getElementById("produce").onsubmit = async (e) => {
      e.preventDefault();
      const d = new FormData(e.target), [hk, ...hv] = String(d.get("header") || "").split("=");
      try {
        const r = await api(`topics/${enc(name)}/messages`, {method: "POST", json: {
          partition: Number(params.get("partition") || 0), key: d.get("key"), value: d.get("value"),
          headers: hk ? [{key: hk, value: hv.join("=")}] : []}});
        document.getElementById("status").textContent = `produced at offset ${r.offset}`;
        route();
      } catch (err) { fail(err); }
    };
    const box = document.getElementById("records");
    try {
      const r = await api(`topics/${enc(name)}/messages?${params}`);
      box.innerHTML = `<p>Partition ${esc(r.partition)}: offsets ${esc(r.start_offset)} to ${esc(r.end_offset)}</p>` +
        table(["Offset", "Timestamp", "Key", "Value", "Headers"], r.records.map((m) => [esc(m.offset),
          esc(new Date(m.timestamp).toISOString()), shown(m.key), shown(m.value),
          m.headers.map((h) => `${esc(h.key)}: ${shown(h.value)}`).join("")]));
    } catch (err) { box.innerHTML = `<p class="error" role="alert">${esc(err.message)}</p>`; }
    return false;
  },
  async groups() {
    const g = await api("groups");
    main.innerHTML = `<h1>Consumer groups</h1>${table(["Group", "State", "Protocol type"], g.groups.map((x) => [
      `<a href="#/group/${enc(x.group_id)}">${esc(x.group_id)}</a>`, esc(x.state ?? "-"), esc(x.protocol_type ?? "-")]))}`;
  },
  async group(id) {
    const g = await api("groups/" + enc(id));
    // The forms stay while the figures above them refresh.
    if (document.getElementById("group-forms")?.dataset.group !== id) {
      main.innerHTML = `<div id="group-live"></div><div id="group-forms" data-group="${esc(id)}">
        <form id="reset" aria-label="Reset offsets"><label>Topic <input name="topic" required></label>
          <label>Reset to <select name="to"><option value="earliest">earliest</option><option value="latest">latest</option><option value="offset">offset</option></select></label>
          <label>Offset <input name="offset" type="number" min="0"></label><button>Reset offsets</button></form>
        <form id="delete-group" aria-label="Delete the group"><label>Type the group's id to delete it <input name="confirm" required></label><button>Delete group</button></form></div>`;
      const on = (formId, f) => { const form = document.getElementById(formId); form.onsubmit = async (e) => {
        e.preventDefault(); try { await f(new FormData(form)); } catch (err) { fail(err); } }; };
      on("reset", async (d) => { await api(`groups/${enc(id)}/reset`, {method: "POST", json: {topic: d.get("topic"), to: d.get("to"), offset: d.get("offset")}});
        document.getElementById("status").textContent = "offsets reset"; });
      on("delete-group", async (d) => { if (d.get("confirm") !== id) throw new Error("type the group's id to confirm");
        await api(`groups/${enc(id)}`, {method: "DELETE"}); location.hash = "#/groups"; });
    }
    document.getElementById("group-live").innerHTML = `<h1>Group ${esc(id)}</h1><p>State ${esc(g.state)}, protocol ${esc(g.protocol_type)}/${esc(g.protocol)}, total lag <output id="lag">${esc(g.total_lag)}</output></p>
      ${chart(g.lag_history, ["lag"], "total lag")}
      <h2>Members</h2>${table(["Member", "Client", "Host", "Assignment"], g.members.map((m) => [esc(m.member_id), esc(m.client_id), esc(m.host),
        esc(m.assignment.map((a) => `${a.topic}: ${a.partitions.join(",")}`).join("; "))]))}
      <h2>Offsets</h2>${table(["Topic", "Partition", "Committed", "Log end", "Lag"], g.offsets.map((o) => [
        esc(o.topic), esc(o.partition), esc(o.committed), esc(o.log_end), esc(o.lag)]))}`;
  },
  async security() {
    const s = await api("security");
    const section = (title, part, headers, row) => `<h2>${esc(title)}</h2>` +
      (part.error ? `<p class="error">${esc(part.error)}</p>` : table(headers, part.rows.map(row)));
    main.innerHTML = `<h1>Security</h1>
      ${section("SCRAM users", s.users, ["User", "Mechanisms"], (u) => [esc(u.user), esc(u.mechanisms.join(", "))])}
      ${s.may_alter ? `<form id="user" aria-label="Set a user's password"><label>User <input name="user" required></label>
        <label>Password <input name="password" type="password" required></label>
        <label>Mechanism <select name="mechanism"><option>SCRAM-SHA-256</option><option>SCRAM-SHA-512</option></select></label><button>Set password</button></form>` : ""}
      ${section("ACLs", s.acls, ["Principal", "Permission", "Operation", "Resource", "Pattern", "Host"], (a) => [esc(a.principal),
        esc(a.permission_type), esc(a.operation), `${esc(a.resource_type)} ${esc(a.resource_name)}`, esc(a.pattern_type), esc(a.host)])}
      ${s.may_alter ? `<form id="acl" aria-label="Add an ACL"><label>Principal <input name="principal" placeholder="User:alice" required></label>
        <label>Permission <select name="permission_type"><option>ALLOW</option><option>DENY</option></select></label>
        <label>Operation <select name="operation">${["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"].map((o) => `<option>${o}</option>`).join("")}</select></label>
        <label>Resource type <select name="resource_type"><option>TOPIC</option><option>GROUP</option><option>CLUSTER</option><option>TRANSACTIONAL_ID</option></select></label>
        <label>Resource name <input name="resource_name" value="*"></label>
        <label>Pattern <select name="pattern_type"><option>LITERAL</option><option>PREFIXED</option></select></label>
        <button name="add">Add ACL</button><button name="remove" value="1">Remove ACL</button></form>` : ""}
      ${section("Client quotas", s.quotas, ["Entity", "Quotas"], (q) => [esc(Object.entries(q.entity).map(([k, v]) => `${k}=${v ?? "<default>"}`).join(", ")),
        esc(Object.entries(q.values).map(([k, v]) => `${k}=${v}`).join(", "))])}
      ${s.may_alter ? `<form id="quota" aria-label="Set a client quota"><label>Entity type <select name="entity_type"><option>user</option><option>client-id</option></select></label>
        <label>Entity name (empty: default) <input name="entity_name"></label>
        <label>Quota <select name="key"><option>producer_byte_rate</option><option>consumer_byte_rate</option><option>request_percentage</option></select></label>
        <label>Value (empty: remove) <input name="value"></label><button>Set quota</button></form>` : ""}`;
    const on = (id, f) => { const form = document.getElementById(id); if (form) form.onsubmit = async (e) => {
      e.preventDefault(); try { await f(Object.fromEntries(new FormData(form)), e.submitter); route(); } catch (err) { fail(err); } }; };
    on("user", (d) => api("security/users", {method: "POST", json: d}));
    on("acl", (d, button) => api(button?.name === "remove" ? "security/acls/remove" : "security/acls", {method: "POST", json: d}));
    on("quota", (d) => api("security/quotas", {method: "POST", json: d}));
    return false;
  },
};

async function showLogin(message = "", user = "") {
  clearInterval(timer);
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
}

async function route() {
  clearInterval(timer);
  const [path] = location.hash.replace(/^#\//, "").split("?");
  const [page, ...rest] = path.split("/");
  const render = pages[page] || pages.overview;
  const arg = decodeURIComponent(rest.join("/"));
  const once = async () => {
    try { return await render(arg); } catch (err) { if (err.message !== "log in first") { main.innerHTML = ""; fail(err); } return false; }
  };
  // Pages with forms render once; the others refresh live.
  if ((await once()) !== false) timer = setInterval(once, REFRESH_MS);
}

async function start() {
  const s = await fetch("/console/api/session").then((r) => r.json());
  if (s.login_required && !s.principal) return showLogin();
  who.innerHTML = `${esc(s.principal)}${s.login_required ? ' <button id="logout">Log out</button>' : ""}`;
  const out = document.getElementById("logout");
  if (out) out.onclick = async () => { await api("logout", {method: "POST"}); who.textContent = ""; showLogin(); };
  route();
}

window.addEventListener("hashchange", route);
start();
