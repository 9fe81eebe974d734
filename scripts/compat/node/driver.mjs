// driver.mjs runs the RocketMQ 5 Node.js SDK (rocketmq-client-nodejs,
// exactly 1.0.8, unmodified) for scripts/compat/v5_node_test.go: it reads
// one JSON request a line on stdin, {"id": n, "op": "...", ...}, carries it
// out with the SDK and writes one JSON answer a line on stdout,
// {"id": n, "result": ...} or {"id": n, "error": {"name", "code", "message"}}.
// The SDK's log goes to stderr (warnings and errors; all of it with
// SLUICE_NODE_DEBUG=1), never to ~/logs.
//
// The environment names the broker: SLUICE_V5_ENDPOINT (host:port of its
// gRPC port), SLUICE_V5_TLS=1 to connect with TLS (grpc-js trusts the
// certificate file GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), SLUICE_V5_ACCESS_KEY
// and SLUICE_V5_SECRET_KEY for the SDK's sessionCredentials. A request may
// override each (endpoint, tls, accessKey, secretKey: "" for none).
import { createInterface } from 'node:readline';
import { format } from 'node:util';
import { ConsumeResult, FilterExpression, Producer, PushConsumer, SimpleConsumer } from 'rocketmq-client-nodejs';

const debug = process.env.SLUICE_NODE_DEBUG === '1';
const log = level => (...a) => process.stderr.write(`${new Date().toISOString()} [sdk ${level}] ${format(...a)}\n`);
const logger = {
  info: debug ? log('info') : () => {},
  debug: debug ? log('debug') : () => {},
  warn: log('warn'),
  error: log('error'),
};

// TransactionResolution of the v5 protocol (definition.proto).
const COMMIT = 1;
const ROLLBACK = 2;
// FilterType of the v5 protocol.
const SQL = 2;

const clients = new Map(); // name → Producer | SimpleConsumer
const views = new Map(); // ref → MessageView, for ack and changeInvisibleDuration
const checks = []; // transaction check-backs seen: {messageId, property}
const pushed = new Map(); // push consumer name → the messages its listener got
let nextRef = 1;

function clientOptions(req) {
  const accessKey = req.accessKey ?? process.env.SLUICE_V5_ACCESS_KEY ?? '';
  const secretKey = req.secretKey ?? process.env.SLUICE_V5_SECRET_KEY ?? '';
  return {
    endpoints: req.endpoint ?? process.env.SLUICE_V5_ENDPOINT,
    sslEnabled: req.tls ?? process.env.SLUICE_V5_TLS === '1',
    sessionCredentials: accessKey ? { accessKey, accessSecret: secretKey } : undefined,
    namespace: '',
    requestTimeout: req.requestTimeoutMs ?? 5000,
    logger,
  };
}

function client(name) {
  const c = clients.get(name);
  if (!c) throw new Error(`no client named ${name}`);
  return c;
}

// checker answers a check-back with the message's "check" property:
// commit, rollback, or nothing (unknown: asked again later).
const checker = {
  async check(view) {
    const want = view.properties.get('check') ?? '';
    checks.push({ messageId: view.messageId, topic: view.topic, check: want });
    if (want === 'commit') return COMMIT;
    if (want === 'rollback') return ROLLBACK;
    return 0;
  },
};

function viewJSON(v) {
  const ref = String(nextRef++);
  views.set(ref, v);
  return {
    ref,
    messageId: v.messageId,
    topic: v.topic,
    body: v.body.toString('utf8'),
    corrupted: v.corrupted === true,
    tag: v.tag ?? null,
    keys: v.keys,
    properties: Object.fromEntries(v.properties),
    messageGroup: v.messageGroup ?? null,
    deliveryTimestampMs: v.deliveryTimestamp ? v.deliveryTimestamp.getTime() : null,
    bornTimestampMs: v.bornTimestamp ? v.bornTimestamp.getTime() : null,
    bornHost: v.bornHost,
    deliveryAttempt: v.deliveryAttempt ?? null,
    offset: v.offset ?? null,
    endpoints: v.endpoints ? v.endpoints.facade : null,
  };
}

function message(req) {
  const m = { topic: req.topic, body: Buffer.from(req.body ?? '', 'utf8') };
  if (req.tag) m.tag = req.tag;
  if (req.keys) m.keys = req.keys;
  if (req.properties) m.properties = new Map(Object.entries(req.properties));
  if (req.messageGroup) m.messageGroup = req.messageGroup;
  if (req.deliveryTimestampMs) m.deliveryTimestamp = new Date(req.deliveryTimestampMs);
  return m;
}

const ops = {
  async producer(req) {
    const p = new Producer({ ...clientOptions(req), topics: req.topics, maxAttempts: req.maxAttempts,
      checker: req.checker ? checker : undefined });
    await p.startup();
    clients.set(req.name, p);
    return { clientId: p.clientId };
  },
  // simpleConsumer subscribes to each topic of req.subscriptions with a
  // tag expression, or {"sql": "..."} for a SQL92 one.
  async simpleConsumer(req) {
    const subs = new Map();
    for (const [ topic, expr ] of Object.entries(req.subscriptions)) {
      subs.set(topic, typeof expr === 'string' ? expr : new FilterExpression(expr.sql, SQL));
    }
    const c = new SimpleConsumer({ ...clientOptions(req), consumerGroup: req.group,
      subscriptions: subs, awaitDuration: req.awaitMs ?? 2000 });
    await c.startup();
    clients.set(req.name, c);
    return { clientId: c.clientId };
  },
  // pushConsumer starts a PushConsumer whose listener records each
  // message and answers SUCCESS, or FAILURE for a message whose "fail"
  // property is at least its delivery attempt.
  async pushConsumer(req) {
    const subs = new Map();
    for (const [ topic, expr ] of Object.entries(req.subscriptions)) {
      subs.set(topic, typeof expr === 'string' ? expr : new FilterExpression(expr.sql, SQL));
    }
    const got = [];
    pushed.set(req.name, got);
    const c = new PushConsumer({ ...clientOptions(req), consumerGroup: req.group, subscriptions: subs,
      messageListener: {
        consume(view) {
          got.push({ ...viewJSON(view), consumedAtMs: Date.now() });
          const fail = Number(view.properties.get('fail') ?? 0);
          return fail >= (view.deliveryAttempt ?? 1) ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
        },
      } });
    await c.startup();
    clients.set(req.name, c);
    return { clientId: c.clientId };
  },
  async pushed(req) {
    return pushed.get(req.client) ?? [];
  },
  async send(req) {
    const r = await client(req.client).send(message(req));
    return { messageId: r.messageId, offset: Number(r.offset), transactionId: r.transactionId };
  },
  // sendTx sends one message in a transaction and ends it with req.end:
  // commit, rollback, or none (left open for the broker's check-back).
  async sendTx(req) {
    const p = client(req.client);
    const tx = p.beginTransaction();
    const r = await p.send(message(req), tx);
    if (req.end === 'commit') await tx.commit();
    if (req.end === 'rollback') await tx.rollback();
    return { messageId: r.messageId, offset: Number(r.offset), transactionId: r.transactionId };
  },
  async checks() {
    return checks;
  },
  async receive(req) {
    const got = await client(req.client).receive(req.max ?? 16, req.invisibleMs ?? 10000);
    return got.map(viewJSON);
  },
  async ack(req) {
    const v = views.get(req.ref);
    if (!v) throw new Error(`no message ref ${req.ref}`);
    await client(req.client).ack(v);
    return {};
  },
  async changeInvisibleDuration(req) {
    const v = views.get(req.ref);
    if (!v) throw new Error(`no message ref ${req.ref}`);
    const before = v.receiptHandle;
    await client(req.client).changeInvisibleDuration(v, req.invisibleMs);
    return { handleChanged: v.receiptHandle !== before };
  },
  async shutdown(req) {
    const c = client(req.client);
    clients.delete(req.client);
    await c.shutdown();
    return {};
  },
};

function errorJSON(e) {
  const err = e instanceof Error ? e : new Error(String(e));
  // NB: startup wraps the SDK's exception twice: its name and v5 code are
  // those of the innermost error that has a code.
  let message = err.message;
  let name = err.name;
  let code = typeof err.code === 'number' ? err.code : null;
  for (let c = err.cause; c; c = c.cause) {
    message += `; cause: ${c.message ?? c}`;
    if (code === null && typeof c.code === 'number') {
      code = c.code;
      name = c.name;
    }
  }
  return { name, code, message };
}

// Requests are carried out one at a time, in order.
let chain = Promise.resolve();
const rl = createInterface({ input: process.stdin });
rl.on('line', line => {
  if (!line.trim()) return;
  chain = chain.then(async () => {
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      process.stdout.write(JSON.stringify({ id: null, error: errorJSON(e) }) + '\n');
      return;
    }
    const op = ops[req.op];
    let answer;
    try {
      if (!op) throw new Error(`unknown op ${req.op}`);
      answer = { id: req.id, result: await op(req) };
    } catch (e) {
      answer = { id: req.id, error: errorJSON(e) };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  });
});
// At the end of the input: every client shut down, then exit.
rl.on('close', () => {
  chain = chain.then(async () => {
    for (const [ name, c ] of clients) {
      try {
        await c.shutdown();
      } catch (e) {
        console.error(`shutting down ${name}:`, e);
      }
    }
    process.exit(0);
  });
});
