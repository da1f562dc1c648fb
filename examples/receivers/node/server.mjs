// A minimal Tributary webhook receiver in Node.js, built-in modules only (docs/receivers.md).
//
//   SHARED_SECRET=dev-secret PORT=9000 node examples/receivers/node/server.mjs
//
// Environment: SHARED_SECRET (required), PREVIOUS_SHARED_SECRET (also accepted, during a
// rotation), STANDARD_WEBHOOKS=true (verify webhook-id/-timestamp/-signature instead of
// X-Signature), PORT (default 9000), HOST (default 127.0.0.1).
//
// It verifies the signature over the RAW body bytes. Do not use a JSON body parser before
// verifying (express.json() and friends): JSON.stringify(JSON.parse(body)) changes key
// spacing, number formats (12345678901234567890123, 25.00) and escapes, and so the HMAC.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const TOLERANCE_SECONDS = 5 * 60; // refuse webhook-timestamps further than this from our clock
const MAX_BODY_BYTES = 1 << 20;

// The current secret first, then the previous one during a rotation.
const secrets = [process.env.SHARED_SECRET, process.env.PREVIOUS_SHARED_SECRET].filter(Boolean);
const standard = process.env.STANDARD_WEBHOOKS === 'true';
if (secrets.length === 0) {
  console.error('set SHARED_SECRET to the destination\'s sharedSecret');
  process.exit(1);
}

// Constant-time string comparison (timingSafeEqual needs equal lengths; lengths are not secret).
function safeEqual(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

// X-Signature = lower-case hex HMAC-SHA1(secret, body).
function verifyXSignature(headers, body) {
  const got = (headers['x-signature'] || '').trim().toLowerCase();
  if (!got) return 'missing X-Signature';
  for (const s of secrets) {
    if (safeEqual(got, createHmac('sha1', s).update(body).digest('hex'))) return null;
  }
  return 'bad X-Signature';
}

// The HMAC key of a secret: the base64-decoded part after "whsec_" when the secret has that
// form, else the secret's own bytes. (Buffer.from(…, 'base64') never fails, so check first.)
function standardKey(secret) {
  const rest = secret.startsWith('whsec_') ? secret.slice(6) : null;
  if (rest !== null && rest.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(rest)) {
    return Buffer.from(rest, 'base64');
  }
  return Buffer.from(secret);
}

// webhook-signature holds space-separated "v1,<base64>" signatures, each
// base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)); one must match.
function verifyStandardWebhooks(headers, body) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !/^[0-9]+$/.test(ts || '') || !sigs) {
    return 'missing or malformed webhook-id, webhook-timestamp or webhook-signature';
  }
  if (Math.abs(Date.now() / 1000 - Number(ts)) > TOLERANCE_SECONDS) {
    return 'webhook-timestamp too far from now'; // a replay, or a wrong clock
  }
  for (const s of secrets) {
    const mac = createHmac('sha256', standardKey(s)).update(`${id}.${ts}.`).update(body);
    const want = 'v1,' + mac.digest('base64');
    for (const sig of sigs.split(' ').filter(Boolean)) {
      if (safeEqual(sig, want)) return null;
    }
  }
  return 'bad webhook-signature';
}

// The last 10,000 message ids: delivery is at-least-once, so the same message may arrive twice.
// A real receiver keeps them where it keeps the effect (same transaction).
const seen = new Set();
function firstTime(id) {
  if (seen.has(id)) return false;
  seen.add(id);
  if (seen.size > 10000) seen.delete(seen.values().next().value); // the oldest
  return true;
}

function reply(res, status, text) {
  res.writeHead(status, { 'Content-Type': 'text/plain' }).end(text + '\n');
}

const server = createServer((req, res) => {
  if (req.method !== 'POST') return reply(res, 405, 'POST only');
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size <= MAX_BODY_BYTES) chunks.push(c);
  });
  req.on('end', () => {
    if (size > MAX_BODY_BYTES) return reply(res, 413, 'body too large');
    const body = Buffer.concat(chunks); // the raw bytes, exactly as signed
    const headers = req.headers; // Node lower-cases header names
    const err = standard ? verifyStandardWebhooks(headers, body) : verifyXSignature(headers, body);
    if (err) return reply(res, 401, err); // 4xx: not retried
    let msg;
    try {
      msg = JSON.parse(body.toString('utf8')); // parse only after verifying
    } catch {
      return reply(res, 400, 'not JSON');
    }
    // With Standard Webhooks, webhook-id is signed; X-Message-Id is not.
    const id = standard ? headers['webhook-id'] : headers['x-message-id'];
    if (id && !firstTime(id)) return reply(res, 200, 'duplicate'); // still 2xx, or it is retried
    console.log(`webhook ${id} type=${msg.type} userId=${msg.userId}`);
    // Answer within 5 seconds: queue slow work and return.
    reply(res, 200, 'ok');
  });
});

const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 9000);
server.listen(port, host, () => {
  console.log(`listening on http://${host}:${port} (standard webhooks: ${standard})`);
});
