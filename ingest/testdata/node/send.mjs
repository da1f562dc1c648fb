// Sends one call of each type with Segment's own Node client to INGEST_URL, then exits 0 once
// every call was flushed successfully (non-zero otherwise). Used by ingest/nodeclient_test.go.
import { Analytics } from '@segment/analytics-node'

const analytics = new Analytics({
  writeKey: process.env.WRITE_KEY,
  host: process.env.INGEST_URL,
  flushInterval: 100,
  maxEventsInBatch: 20,
})
let failed = 0
analytics.on('error', (err) => { failed++; console.error('analytics-node error:', err) })

analytics.identify({ userId: 'node-1', traits: { email: 'a@example.com', friends: 29 } })
analytics.track({ userId: 'node-2', event: 'Order Completed', properties: { total: 27.5 } })
analytics.page({ anonymousId: 'node-3', name: 'Pricing', properties: { url: 'https://example.com/pricing' } })
analytics.screen({ userId: 'node-4', name: 'Home' })
analytics.group({ userId: 'node-5', groupId: 'g-1', traits: { name: 'Initech' } })
analytics.alias({ userId: 'node-6', previousId: 'anon-6' })

await analytics.closeAndFlush({ timeout: 10000 })
process.exit(failed === 0 ? 0 : 1)
