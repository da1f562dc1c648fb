"""A minimal Tributary webhook receiver in Python, standard library only (docs/receivers.md).

    SHARED_SECRET=dev-secret PORT=9000 python3 examples/receivers/python/server.py

Environment: SHARED_SECRET (required), PREVIOUS_SHARED_SECRET (also accepted, during a
rotation), STANDARD_WEBHOOKS=true (verify webhook-id/-timestamp/-signature instead of
X-Signature), PORT (default 9000), HOST (default 127.0.0.1).

It verifies the signature over the RAW body bytes. Never json.loads and json.dumps the body
before verifying (nor use request.json in a framework): spacing, key order, number formats
(12345678901234567890123, 25.00) and escapes would change, and so would the HMAC.
"""

import base64
import binascii
import collections
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_SECONDS = 5 * 60  # refuse webhook-timestamps further than this from our clock
MAX_BODY_BYTES = 1 << 20

# The current secret first, then the previous one during a rotation.
SECRETS = [s.encode() for s in (os.environ.get("SHARED_SECRET"), os.environ.get("PREVIOUS_SHARED_SECRET")) if s]
STANDARD = os.environ.get("STANDARD_WEBHOOKS") == "true"


def verify_x_signature(headers, body):
    """X-Signature = lower-case hex HMAC-SHA1(secret, body)."""
    got = (headers.get("X-Signature") or "").strip().lower()
    if not got:
        return "missing X-Signature"
    for secret in SECRETS:
        want = hmac.new(secret, body, hashlib.sha1).hexdigest()
        if hmac.compare_digest(got.encode(), want.encode()):  # constant time
            return None
    return "bad X-Signature"


def standard_key(secret):
    """The base64-decoded part after "whsec_" when the secret has that form, else its bytes."""
    if secret.startswith(b"whsec_"):
        try:
            return base64.b64decode(secret[6:], validate=True)
        except binascii.Error:
            pass
    return secret


def verify_standard_webhooks(headers, body):
    """webhook-signature holds space-separated "v1,<base64>" signatures, each
    base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)); one must match."""
    msg_id = headers.get("webhook-id") or ""
    ts = headers.get("webhook-timestamp") or ""
    sigs = headers.get("webhook-signature") or ""
    if not msg_id or not re.fullmatch(r"[0-9]+", ts) or not sigs:
        return "missing or malformed webhook-id, webhook-timestamp or webhook-signature"
    if abs(time.time() - int(ts)) > TOLERANCE_SECONDS:
        return "webhook-timestamp too far from now"  # a replay, or a wrong clock
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    for secret in SECRETS:
        mac = hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
        want = b"v1," + base64.b64encode(mac)
        for sig in sigs.split():
            if hmac.compare_digest(sig.encode(), want):
                return None
    return "bad webhook-signature"


# The last 10,000 message ids: delivery is at-least-once, so the same message may arrive
# twice. A real receiver keeps them where it keeps the effect (same transaction).
_seen = collections.OrderedDict()
_seen_lock = threading.Lock()


def first_time(msg_id):
    with _seen_lock:
        if msg_id in _seen:
            return False
        _seen[msg_id] = True
        if len(_seen) > 10000:
            _seen.popitem(last=False)  # the oldest
        return True


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, text):
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply(405, "POST only")

    def do_POST(self):
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self.reply(411, "Content-Length required")
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            return self.reply(413, "body too large")
        body = self.rfile.read(int(length))  # the raw bytes, exactly as signed
        verify = verify_standard_webhooks if STANDARD else verify_x_signature
        err = verify(self.headers, body)
        if err:
            return self.reply(401, err)  # 4xx: not retried
        try:
            msg = json.loads(body)  # parse only after verifying
        except ValueError:
            return self.reply(400, "not JSON")
        # With Standard Webhooks, webhook-id is signed; X-Message-Id is not.
        msg_id = self.headers.get("webhook-id" if STANDARD else "X-Message-Id")
        if msg_id and not first_time(msg_id):
            return self.reply(200, "duplicate")  # still 2xx, or it is retried
        print(f"webhook {msg_id} type={msg.get('type')} userId={msg.get('userId')}", flush=True)
        # Answer within 5 seconds: queue slow work and return.
        self.reply(200, "ok")

    def log_message(self, fmt, *args):  # one line per webhook is printed above
        pass


def main():
    if not SECRETS:
        sys.exit("set SHARED_SECRET to the destination's sharedSecret")
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "9000"))
    server = ThreadingHTTPServer((host, port), Handler)
    print(f"listening on http://{host}:{port} (standard webhooks: {STANDARD})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
