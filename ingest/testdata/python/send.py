"""Runs Segment's analytics-python, unmodified, against Tributary's ingest.

See ingest/pythonclient_test.go: one message of each call type, then a flush. Exits 0 only when
the library reported no error.
"""
import os
import sys

from segment.analytics import Client

errors = []


def on_error(error, items):
    errors.append(error)
    print("failure:", error, file=sys.stderr)


client = Client(
    os.environ["WRITE_KEY"],
    host=os.environ["INGEST_URL"],
    on_error=on_error,
    max_retries=1,
)
client.identify("python-1", {"email": "ada@example.com"})
client.track("python-2", "Order Completed", {"revenue": 27.5})
client.page("python-3", "Docs", "Pricing", {"url": "https://example.com/pricing"})
client.screen("python-4", "Main", "Home")
client.group("python-5", "g-1", {"name": "Initech"})
client.alias("python-anon", "python-6")
client.flush()
client.shutdown()
if errors:
    sys.exit(1)
print("sent 6")
