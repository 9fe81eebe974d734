// Sluice console: a single-page application over the JSON API (/api/).
// Pages are hash routes (#/topics, #/group/NAME, #/live?topic=T&group=G);
// each renders into #view and marks it data-ready="<page>" once its data
// is shown, which the browser tests wait for.
"use strict";

(function () {
  const view = document.getElementById("view");
  const notice = document.getElementById("notice");
  let config = { readOnly: true, sampleEveryMs: 5000 };
  let timer = null; // the current page's refresh timer
  let generation = 0; // bumped on every navigation; stale renders stop

  // ---- helpers ----------------------------------------------------------

  function esc(v) {
    return String(v == null ? "" : v).replace(/[&<>"']/g, (c) =>
      ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  let csrf = ""; // the session's CSRF token, when ACL is on

  async function api(method, path, body) {
    const opts = { method, headers: {} };
    if (body !== undefined) opts.body = JSON.stringify(body);
    if (method !== "GET") {
      // Every write is JSON, bodiless ones too: the console refuses others
      // (a cross-site form cannot send this type without a preflight).
      opts.headers["Content-Type"] = "application/json";
      opts.headers["X-CSRF-Token"] = csrf;
    }
    const resp = await fetch(path, opts);
    if (resp.status === 401 && path !== "/api/login") {
      login();
      throw new Error("log in first");
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      throw new Error(method + " " + path + ": answer is not JSON (HTTP " + resp.status + ")");
    }
    if (!resp.ok) throw new Error(data && data.error ? data.error : "HTTP " + resp.status);
    return data;
  }
  // stale is what get throws when the user navigated while it waited: the
  // page that asked is gone and must not draw over the new one (a topics
  // render a delete started, answered after the next page's, did).
  const stale = new Error("stale page");
  async function get(path) {
    const gen = generation;
    const data = await api("GET", path);
    if (gen !== generation) throw stale;
    return data;
  }

  function say(text, ok) {
    notice.textContent = text;
    notice.className = ok ? "info" : "";
    notice.hidden = !text;
  }

  function fmtTime(ms) {
    return ms > 0 ? new Date(ms).toLocaleString() : "-";
  }

  function fmtAge(ms) {
    if (ms < 0) return "unknown";
    if (ms < 1000) return ms + " ms";
    const s = ms / 1000;
    if (s < 120) return s.toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  function fmtLag(v) {
    return v < 0 ? "unknown" : String(v);
  }

  function fmtRate(v) {
    return v > 0 ? window.fmtNum(v) + "/s" : "0";
  }

  function link(route, text) {
    return '<a href="#/' + route + '">' + esc(text) + "</a>";
  }

  function enc(s) {
    return encodeURIComponent(s);
  }

  let renderStart = 0; // performance.now() when the current page began rendering

  // ready marks the page shown, with the milliseconds its render took
  // (requests and DOM) in data-render-ms.
  function ready(page) {
    view.dataset.renderMs = String(Math.round(performance.now() - renderStart));
    view.dataset.ready = page;
  }

  function every(fn) {
    const gen = generation;
    const tick = async () => {
      if (gen !== generation) return;
      try {
        await fn();
      } catch (e) {
        if (e !== stale) say(e.message);
      }
      if (gen === generation) timer = setTimeout(tick, Math.max(1000, config.sampleEveryMs));
    };
    timer = setTimeout(tick, Math.max(1000, config.sampleEveryMs));
  }

  function table(headers, rows) {
    const th = headers.map((h) => (h.startsWith("#") ? '<th class="num">' + esc(h.slice(1)) : "<th>" + esc(h)) + "</th>");
    return "<table><thead><tr>" + th.join("") + "</tr></thead><tbody>" + rows.join("") + "</tbody></table>";
  }

  function tr(cells) {
    return "<tr>" + cells.map((c) => (typeof c === "number" ? '<td class="num">' + c + "</td>" : "<td>" + c + "</td>")).join("") + "</tr>";
  }

  function series(points, field) {
    return points.map((p) => [p.t, p[field]]);
  }

  // ---- pages ------------------------------------------------------------

  async function overview() {
    const c = await get("/api/cluster");
    const rows = c.brokers.map((b) => {
      const rt = b.runtime || {};
      const disk = rt.commitLogDiskRatio ? (parseFloat(rt.commitLogDiskRatio) * 100).toFixed(1) + "%" : "-";
      const marks = rt.diskHighWatermark
        ? (parseFloat(rt.diskHighWatermark) * 100).toFixed(0) + "% / " + (parseFloat(rt.diskFullWatermark) * 100).toFixed(0) + "%"
        : "-";
      const status = b.error ? '<span class="bad">' + esc(b.error) + "</span>"
        : rt.sendsRefused === "true" ? '<span class="bad">refusing sends: ' + esc(rt.sendsRefusedReason || "") + "</span>"
          : '<span class="ok">serving</span>';
      return tr([esc(b.cluster), esc(b.brokerName), b.brokerId, esc(b.role), esc(b.addr), esc("Sluice " + (rt.brokerVersionDesc || "")),
        disk, marks, esc(rt.replicationLag || "-"), esc(rt.putMessageTotal || "-"), esc(rt.getMessageTotal || "-"), status]);
    });
    const last = c.rates.length ? c.rates[c.rates.length - 1] : null;
    view.innerHTML =
      "<h1>Overview</h1>" +
      '<div class="cards"><div class="card"><div class="muted">brokers</div><div class="stat" id="broker-count">' + c.brokers.length + "</div></div>" +
      '<div class="card"><div class="muted">produce rate</div><div class="stat" id="produce-rate">' + fmtRate(last ? last.produceRate : 0) + "</div></div>" +
      '<div class="card"><div class="muted">consume rate</div><div class="stat" id="consume-rate">' + fmtRate(last ? last.consumeRate : 0) + "</div></div></div>" +
      "<h2>Broker groups and members</h2>" +
      table(["Cluster", "Broker", "#ID", "Role", "Address", "Version", "Disk used", "High / full watermark", "Replication lag",
        "#Put total", "#Get total", "Status"], rows) +
      '<h2>Produce and consume rates</h2><div class="card"><canvas class="chart" id="rates-chart"></canvas></div>' +
      (c.sampleError ? '<p class="bad">last sample: ' + esc(c.sampleError) + "</p>" : "");
    window.drawChart(document.getElementById("rates-chart"), {
      left: "msg/s",
      lines: [
        { name: "produce", color: "#1a5fb4", points: series(c.rates.slice(1), "produceRate") },
        { name: "consume", color: "#26a269", points: series(c.rates.slice(1), "consumeRate") },
      ],
    });
    ready("overview");
  }

  async function topics(params) {
    const list = await get("/api/topics");
    const showSys = params.get("system") === "1";
    const filter = params.get("q") || "";
    const shown = list.filter((t) => (showSys || !t.system) && t.topic.includes(filter));
    const rows = shown.map((t) => tr([link("topic/" + enc(t.topic), t.topic), t.readQueues, t.writeQueues, t.perm,
      esc(t.brokers.join(", ")), t.stored < 0 ? "-" : t.stored, fmtRate(t.produceRate),
      config.readOnly ? "" : '<button class="danger" data-delete="' + esc(t.topic) + '">delete</button>']));
    view.innerHTML =
      "<h1>Topics</h1>" +
      (config.readOnly ? "" :
        '<form class="inline" id="topic-form"><label>Topic<input id="topic-name" required></label>' +
        '<label>Read queues<input id="topic-read" type="number" min="1" max="1024" value="8"></label>' +
        '<label>Write queues<input id="topic-write" type="number" min="1" max="1024" value="8"></label>' +
        '<label>Perm<select id="topic-perm"><option value="6">read+write</option><option value="4">read</option><option value="2">write</option></select></label>' +
        '<label><span>Order</span><input id="topic-order" type="checkbox"></label>' +
        '<button id="topic-create">Create or update</button></form>') +
      '<form class="inline" id="topic-filter"><label>Filter<input id="topic-q" value="' + esc(filter) + '"></label>' +
      '<label><span>System topics</span><input id="topic-sys" type="checkbox"' + (showSys ? " checked" : "") + "></label>" +
      '<button>Show</button><span class="muted">' + shown.length + " of " + list.length + " topics</span></form>" +
      table(["Topic", "#Read", "#Write", "#Perm", "Brokers", "#Stored", "#Produce rate", ""], rows);
    const f = document.getElementById("topic-filter");
    f.addEventListener("submit", (e) => {
      e.preventDefault();
      const q = document.getElementById("topic-q").value;
      const sys = document.getElementById("topic-sys").checked ? "1" : "0";
      location.hash = "#/topics?q=" + enc(q) + "&system=" + sys;
    });
    const cf = document.getElementById("topic-form");
    if (cf) {
      cf.addEventListener("submit", async (e) => {
        e.preventDefault();
        const name = document.getElementById("topic-name").value.trim();
        try {
          await api("POST", "/api/topics", {
            topic: name,
            readQueues: +document.getElementById("topic-read").value,
            writeQueues: +document.getElementById("topic-write").value,
            perm: +document.getElementById("topic-perm").value,
            order: document.getElementById("topic-order").checked,
          });
          say("topic " + name + " created", true);
          await render();
        } catch (err) {
          say("creating topic " + name + ": " + err.message);
        }
      });
    }
    view.querySelectorAll("button[data-delete]").forEach((b) =>
      b.addEventListener("click", async () => {
        const name = b.dataset.delete;
        if (!window.confirm("Delete topic " + name + " on every broker?")) return;
        try {
          await api("DELETE", "/api/topics/" + enc(name));
          say("topic " + name + " deleted", true);
          await render();
        } catch (err) {
          say("deleting topic " + name + ": " + err.message);
        }
      }));
    ready("topics");
  }

  async function topic(name) {
    const t = await get("/api/topics/" + enc(name));
    view.innerHTML =
      "<h1>Topic " + esc(name) + "</h1>" +
      "<h2>Route</h2>" +
      table(["Cluster", "Broker", "Addresses", "#Read", "#Write", "#Perm"], t.route.map((b) => tr([esc(b.cluster), esc(b.brokerName),
        esc(Object.entries(b.addrs).map(([id, a]) => id + "=" + a).join(" ")), b.readQueues, b.writeQueues, b.perm]))) +
      "<h2>Queues</h2>" +
      table(["Broker", "#Queue", "#Min offset", "#Max offset", "Last stored"], t.queues.map((q) =>
        tr([esc(q.brokerName), q.queueId, q.minOffset, q.maxOffset, esc(fmtTime(q.lastUpdate))]))) +
      '<h2>Produce rate</h2><div class="card"><canvas class="chart" id="topic-chart"></canvas></div>' +
      '<p><a href="#/messages?topic=' + enc(name) + '">Search its messages</a></p>';
    window.drawChart(document.getElementById("topic-chart"), {
      left: "msg/s", right: "stored",
      lines: [
        { name: "produce", color: "#1a5fb4", points: series(t.history.slice(1), "produceRate") },
        { name: "stored", color: "#888", axis: "right", points: series(t.history, "stored") },
      ],
    });
    ready("topic");
  }

  async function groups() {
    const list = await get("/api/groups");
    const rows = list.filter((g) => !g.system).map((g) => tr([link("group/" + enc(g.group), g.group), fmtLag(g.lag),
      esc(fmtAge(g.lagMs)), fmtRate(g.consumeRate), g.inFlight]));
    view.innerHTML = "<h1>Consumer groups</h1>" + table(["Group", "#Lag (messages)", "#Lag (time)", "#Consume rate", "#In flight (POP)"], rows);
    ready("groups");
  }

  async function group(name) {
    const draw = async () => {
      const g = await get("/api/groups/" + enc(name));
      const members = g.members.map((m) => tr([esc(m.clientId), esc(m.clientAddr), esc(m.language + " " + m.version),
        esc(Object.keys(m.subscriptions).map((t) => t + "=" + m.expressionTypes[t] + ":" + m.subscriptions[t]).join(", "))]));
      const queues = g.queues.map((q) => tr([esc(q.topic), esc(q.brokerName), q.queueId, q.brokerOffset, q.consumerOffset,
        fmtLag(q.lag), esc(fmtAge(q.lagMs))]));
      document.getElementById("group-body").innerHTML =
        '<div class="cards"><div class="card"><div class="muted">lag (messages)</div><div class="stat" id="group-lag">' + fmtLag(g.lag) +
        "</div></div>" + '<div class="card"><div class="muted">lag (time)</div><div class="stat" id="group-lag-time">' + esc(fmtAge(g.lagMs)) +
        "</div></div>" + '<div class="card"><div class="muted">members</div><div class="stat">' + g.members.length + "</div><div class=muted>" +
        esc(g.consumeType || "offline") + " " + esc(g.messageModel || "") + "</div></div></div>" +
        '<h2>Lag over the last hour</h2><div class="card"><canvas class="chart" id="lag-chart"></canvas></div>' +
        "<h2>Members</h2>" + table(["Client id", "Address", "Client", "Subscriptions"], members) +
        "<h2>Lag per queue</h2>" + table(["Topic", "Broker", "#Queue", "#Broker offset", "#Consumer offset", "#Lag (messages)", "#Lag (time)"], queues) +
        (g.pop.length ? '<h2>POP (RocketMQ 5 consumers)</h2><div class="card"><canvas class="chart" id="pop-chart"></canvas></div>' +
          table(["Topic", "Broker", "#Queue", "#In flight", "#Waiting (FIFO)", "#Oldest in flight", "#Redeliveries", "#DLQ"],
            g.pop.map((q) => tr([esc(q.topic), esc(q.brokerName), q.queueId, q.inFlight, q.waiting, esc(q.oldestInFlightMs < 0 ? "-" : fmtAge(q.oldestInFlightMs)),
              q.redeliveries, q.dlq]))) : "") +
        '<h2>Running status</h2><p><button id="status-load">Ask the members</button></p><div id="status"></div>' +
        "<p>" + g.topics.map((t) => link("live?topic=" + enc(t) + "&group=" + enc(name), "live chart of " + t)).join(" · ") +
        " · " + link("messages?dlq=" + enc(name), "dead-letter queue") + "</p>";
      document.getElementById("status-load").addEventListener("click", async () => {
        try {
          const st = await get("/api/groups/" + enc(name) + "/status");
          document.getElementById("status").innerHTML = table(["Client id", "Via broker", "Consume type", "#Queues", "#Cached",
            "#Pull/s", "#OK/s", "#Failed/s", "#Failed (hour)", "Error"], st.map((m) => tr([esc(m.clientId), esc(m.broker),
            esc(m.consumeType || "-"), m.queues, m.cachedMsgs, window.fmtNum(m.pullTps), window.fmtNum(m.consumeOkTps),
            window.fmtNum(m.consumeFailedTps), m.failedInHour, '<span class="bad">' + esc(m.error || "") + "</span>"])));
          generation++; // NB: keep the answer on screen: stop refreshing the page
        } catch (err) {
          say("running status: " + err.message);
        }
      });
      const topicSel = document.getElementById("reset-topic");
      if (topicSel && !topicSel.options.length) {
        topicSel.innerHTML = g.topics.map((t) => "<option>" + esc(t) + "</option>").join("");
      }
      window.drawChart(document.getElementById("lag-chart"), {
        left: "messages", right: "lag s",
        lines: [
          { name: "lag", color: "#c01c28", fill: true, points: series(g.history.filter((p) => p.lag >= 0), "lag") },
          { name: "lag seconds", color: "#e5a50a", axis: "right", points: g.history.filter((p) => p.lagMs >= 0).map((p) => [p.t, p.lagMs / 1000]) },
        ],
      });
      if (g.pop.length) {
        window.drawChart(document.getElementById("pop-chart"), {
          left: "in flight", right: "redeliveries/s",
          lines: [
            { name: "in flight", color: "#1c71d8", fill: true, points: series(g.history, "inFlight") },
            { name: "redeliveries/s", color: "#c01c28", axis: "right", points: series(g.history, "redeliveryRate") },
          ],
        });
      }
    };
    view.innerHTML = "<h1>Consumer group " + esc(name) + "</h1>" +
      (config.readOnly ? "" :
        '<form class="inline" id="reset-form"><label>Reset offsets of topic<select id="reset-topic"></select></label>' +
        '<label>to the first message stored at or after<input id="reset-time" type="datetime-local" step="1" required></label>' +
        "<button>Reset</button></form>") +
      '<div id="group-body"></div>';
    const rf = document.getElementById("reset-form");
    if (rf) {
      rf.addEventListener("submit", async (e) => {
        e.preventDefault();
        try {
          const r = await api("POST", "/api/groups/" + enc(name) + "/reset", {
            topic: document.getElementById("reset-topic").value,
            time: document.getElementById("reset-time").value,
          });
          say("offsets reset on " + r.offsets.length + " queues", true);
          await draw();
        } catch (err) {
          say("reset: " + err.message);
        }
      });
    }
    await draw();
    ready("group");
    every(draw);
  }

  function bytesOf(b64) {
    const bin = atob(b64 || "");
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function showBody(bytes, how) {
    if (how === "hex") {
      const lines = [];
      for (let i = 0; i < bytes.length; i += 16) {
        const row = Array.from(bytes.slice(i, i + 16));
        lines.push(i.toString(16).padStart(8, "0") + "  " + row.map((x) => x.toString(16).padStart(2, "0")).join(" ").padEnd(48) +
          "  " + row.map((x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : ".")).join(""));
      }
      return lines.join("\n");
    }
    const text = new TextDecoder("utf-8").decode(bytes);
    if (how === "json") {
      try {
        return JSON.stringify(JSON.parse(text), null, 2);
      } catch (e) {
        return "(not JSON: " + e.message + ")\n" + text;
      }
    }
    return text;
  }

  function messageList(msgs, dlqGroup) {
    if (!msgs.length) return '<p class="muted" id="no-messages">no message found</p>';
    return msgs.map((m, i) => {
      const props = Object.entries(m.properties).map(([k, v]) => tr([esc(k), esc(v)]));
      return '<div class="card msgcard" data-msg="' + i + '">' +
        "<div><b>" + esc(m.msgId) + "</b> <span class=muted>" + esc(m.topic) + " · " + esc(m.brokerName) + " queue " + m.queueId +
        " offset " + m.queueOffset + " · stored " + esc(fmtTime(m.storeTime)) + " · reconsumed " + m.reconsumeTimes + "</span>" +
        (dlqGroup && !config.readOnly ? ' <button class="resend" data-id="' + esc(m.msgId) + '">Resend to ' + esc(dlqGroup) + "</button>" : "") +
        (!dlqGroup && !config.readOnly ? '<form class="inline again" data-id="' + esc(m.offsetMsgId) + '"><label>Consume again by group' +
          '<input class="again-group" required></label><button>Consume again</button></form>' : "") +
        "</div><details><summary>properties (" + props.length + ")</summary>" + table(["Name", "Value"], props) + "</details>" +
        '<label class="muted">body as <select class="bodyfmt"><option value="text">text</option><option value="json">JSON</option>' +
        '<option value="hex">hex</option></select></label><pre class="body"></pre></div>';
    }).join("");
  }

  function wireMessages(msgs) {
    view.querySelectorAll("form.again").forEach((f) =>
      f.addEventListener("submit", async (e) => {
        e.preventDefault();
        const group = f.querySelector(".again-group").value.trim();
        try {
          const r = await api("POST", "/api/messages/consume", { offsetMsgId: f.dataset.id, group: group });
          say("consumed again by " + r.clientId + " of " + group + ": " + r.consumeResult + " in " + r.spentTimeMillis + " ms", true);
        } catch (err) {
          say("consume again: " + err.message);
        }
      }));
    view.querySelectorAll(".msgcard").forEach((card) => {
      const bytes = bytesOf(msgs[+card.dataset.msg].body);
      const pre = card.querySelector("pre.body");
      const sel = card.querySelector("select.bodyfmt");
      let how = "text";
      try {
        JSON.parse(new TextDecoder("utf-8").decode(bytes));
        how = "json";
      } catch (e) {
        how = "text";
      }
      sel.value = how;
      pre.textContent = showBody(bytes, how);
      sel.addEventListener("change", () => (pre.textContent = showBody(bytes, sel.value)));
    });
  }

  async function messages(params) {
    const v = (k) => esc(params.get(k) || "");
    view.innerHTML =
      "<h1>Messages</h1>" +
      '<form class="inline" id="search-form">' +
      '<label>Topic<input id="q-topic" value="' + v("topic") + '"></label>' +
      '<label>Message id<input id="q-id" value="' + v("msgId") + '"></label>' +
      '<label>Key<input id="q-key" value="' + v("key") + '"></label>' +
      '<label>From<input id="q-begin" type="datetime-local" step="1" value="' + v("begin") + '"></label>' +
      '<label>To<input id="q-end" type="datetime-local" step="1" value="' + v("end") + '"></label>' +
      '<label>Broker<input id="q-broker" size="10" value="' + v("broker") + '"></label>' +
      '<label>Queue<input id="q-queue" size="4" value="' + v("queue") + '"></label>' +
      '<label>Offset<input id="q-offset" size="8" value="' + v("offset") + '"></label>' +
      '<button id="search">Search</button></form>' +
      '<form class="inline" id="dlq-form"><label>Dead-letter queue of group<input id="q-dlq" value="' + v("dlq") + '"></label>' +
      "<button>Browse</button></form>" +
      '<div id="results"></div>';
    document.getElementById("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const k of ["topic", "msgId", "key", "begin", "end", "broker", "queue", "offset"]) {
        const id = "q-" + (k === "msgId" ? "id" : k);
        const val = document.getElementById(id).value.trim();
        if (val) q.set(k, val);
      }
      location.hash = "#/messages?" + q.toString();
    });
    document.getElementById("dlq-form").addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = "#/messages?dlq=" + enc(document.getElementById("q-dlq").value.trim());
    });
    const results = document.getElementById("results");
    if (params.get("dlq")) {
      const g = params.get("dlq");
      const d = await get("/api/dlq/" + enc(g));
      results.innerHTML = "<h2>" + esc(d.topic) + " (" + d.messages.length + ")</h2>" + messageList(d.messages, g);
      wireMessages(d.messages);
      results.querySelectorAll("button.resend").forEach((b) =>
        b.addEventListener("click", async () => {
          try {
            const r = await api("POST", "/api/dlq/" + enc(g) + "/resend", { msgId: b.dataset.id });
            say("message " + r.msgId + " resent to " + r.to.topic + "; group " + g + " will consume it again", true);
            b.disabled = true;
            b.textContent = "resent";
          } catch (err) {
            say("resend: " + err.message);
          }
        }));
    } else {
      const q = new URLSearchParams();
      for (const k of ["topic", "msgId", "key", "broker", "queue", "offset"]) if (params.get(k)) q.set(k, params.get(k));
      for (const k of ["begin", "end"]) if (params.get(k)) q.set(k, String(new Date(params.get(k)).getTime()));
      if ([...q.keys()].length) {
        const msgs = await get("/api/messages?" + q.toString());
        results.innerHTML = "<h2>" + msgs.length + " found</h2>" + messageList(msgs, "");
        wireMessages(msgs);
      }
    }
    ready("messages");
  }

  async function live(params) {
    const topic = params.get("topic") || "";
    const grp = params.get("group") || "";
    view.innerHTML =
      "<h1>Live peak shaving</h1>" +
      '<form class="inline" id="live-form"><label>Topic<input id="live-topic" value="' + esc(topic) + '"></label>' +
      '<label>Consumer group<input id="live-group" value="' + esc(grp) + '"></label><button>Show</button></form>' +
      '<p class="muted">Producers burst, the broker stores, consumers drain at their own pace: the backlog rises during a burst and falls back once consumers catch up.</p>' +
      '<div class="card"><canvas class="chart" id="live-chart" style="height:320px"></canvas></div><p id="live-status" class="muted"></p>';
    document.getElementById("live-form").addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = "#/live?topic=" + enc(document.getElementById("live-topic").value.trim()) +
        "&group=" + enc(document.getElementById("live-group").value.trim());
    });
    if (!topic || !grp) {
      document.getElementById("live-status").textContent = "choose a topic and a consumer group";
      ready("live");
      return;
    }
    const draw = async () => {
      const l = await get("/api/live?topic=" + enc(topic) + "&group=" + enc(grp));
      const pts = l.points;
      window.drawChart(document.getElementById("live-chart"), {
        left: "msg/s", right: "backlog",
        lines: [
          { name: "produce", color: "#1a5fb4", points: series(pts.slice(1), "produceRate") },
          { name: "consume", color: "#26a269", points: series(pts.slice(1), "consumeRate") },
          { name: "backlog", color: "#c01c28", axis: "right", fill: true, points: series(pts.filter((p) => p.lag >= 0), "lag") },
        ],
      });
      const last = pts.length ? pts[pts.length - 1] : null;
      document.getElementById("live-status").textContent = !l.sampling ? "not sampled yet: group " + grp + " has no offsets on " + topic + " so far"
        : pts.length + " samples, every " + l.everyMs / 1000 + " s; backlog now " + fmtLag(last.lag);
    };
    await draw();
    ready("live");
    every(draw);
  }

  // ---- router -----------------------------------------------------------

  async function render() {
    generation++;
    clearTimeout(timer);
    delete view.dataset.ready;
    renderStart = performance.now();
    const hash = location.hash.replace(/^#\/?/, "") || "overview";
    const [path, query] = hash.split("?");
    const params = new URLSearchParams(query || "");
    const [page, ...rest] = path.split("/");
    const arg = decodeURIComponent(rest.join("/"));
    const nav = { topic: "topics", group: "groups" }[page] || page;
    document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === nav));
    try {
      switch (page) {
        case "overview": await overview(); break;
        case "topics": await topics(params); break;
        case "topic": await topic(arg); break;
        case "groups": await groups(); break;
        case "group": await group(arg); break;
        case "messages": await messages(params); break;
        case "live": await live(params); break;
        default:
          view.innerHTML = "<h1>Not found</h1><p>No page " + esc(page) + ".</p>";
          ready("none");
      }
    } catch (err) {
      if (err === stale) return;
      say(err.message);
      if (!view.dataset.ready) {
        view.insertAdjacentHTML("beforeend", '<p class="bad" id="page-error">' + esc(err.message) + "</p>");
        ready("error");
      }
    }
  }

  window.addEventListener("hashchange", () => {
    say("");
    render();
  });

  // login shows the ACL login form (the API answered 401).
  function login() {
    generation++;
    clearTimeout(timer);
    view.innerHTML = '<h1>Log in</h1><p>ACL is on: log in with an account of the broker\'s ACL file.</p>' +
      '<form id="login-form"><label>Access key <input id="login-key" autocomplete="username"></label> ' +
      '<label>Secret key <input id="login-secret" type="password" autocomplete="current-password"></label> ' +
      '<button id="login-submit" type="submit">Log in</button></form><p class="bad" id="login-error"></p>';
    document.getElementById("login-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const s = await api("POST", "/api/login", {
          accessKey: document.getElementById("login-key").value,
          secretKey: document.getElementById("login-secret").value,
        });
        await start(s);
      } catch (err) {
        document.getElementById("login-error").textContent = err.message;
      }
    });
    ready("login");
  }

  // start loads the configuration and renders the page, for a session s
  // (ACL on: a non-admin account sees a read-only console).
  async function start(s) {
    csrf = s.csrf || "";
    try {
      config = await get("/api/config");
    } catch (err) {
      say("console configuration: " + err.message);
    }
    if (s.auth && !s.admin) config.readOnly = true;
    document.getElementById("mode").textContent =
      (s.auth ? s.accessKey + (config.readOnly ? ", read-only" : "") : config.readOnly ? "read-only" : "");
    await render();
  }

  (async () => {
    let s;
    try {
      s = await get("/api/session");
    } catch (err) {
      return; // NB: 401: the login form is shown
    }
    await start(s);
  })();
})();
