package audiences

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// benchConfig has 10 audiences and 5 computed traits over the events benchEvents sends.
const benchConfig = `
audiences:
  - {id: a1, name: A1, source: engage, rule: {event: Order Completed, atLeast: 3, within: 720h}}
  - {id: a2, name: A2, source: engage, rule: {trait: plan, equals: pro}}
  - {id: a3, name: A3, source: engage, rule: {all: [{event: Product Viewed, atLeast: 5, within: 24h}, {not: {event: Order Completed, within: 24h}}]}}
  - {id: a4, name: A4, source: engage, rule: {event: Order Completed, where: [{property: revenue, gte: 100}]}}
  - {id: a5, name: A5, source: engage, rule: {any: [{trait: country, in: [FR, DE]}, {trait: vip, equals: true}]}}
  - {id: a6, name: A6, source: engage, rule: {computedTrait: spend, gt: 500}}
  - {id: a7, name: A7, source: engage, rule: {event: Signed Up, atMost: 0}}
  - {id: a8, name: A8, source: engage, rule: {trait: email, contains: "@example.com"}}
  - {id: a9, name: A9, source: engage, rule: {event: Page Viewed, atLeast: 10, within: 1h}}
  - {id: a10, name: A10, source: engage, rule: {computedTrait: categories, contains: shoes}}
computedTraits:
  - {id: spend, name: Spend, source: engage, sum: {event: Order Completed, property: revenue, within: 2160h}}
  - {id: orders-30d, name: Orders 30d, source: engage, count: {event: Order Completed, within: 720h}}
  - {id: last-sku, name: Last SKU, source: engage, last: {event: Product Viewed, property: sku}}
  - {id: top-category, name: Top Category, source: engage, mostFrequent: {event: Product Viewed, property: category}}
  - {id: categories, name: Categories, source: engage, uniqueList: {event: Product Viewed, property: category}}
`

var (
	benchCategories = []string{"shoes", "hats", "bags", "coats", "socks"}
	benchPlans      = []string{"free", "pro", "team"}
	benchCountries  = []string{"FR", "DE", "US", "GB"}
)

// benchEvent is the i-th event of the benchmark stream over users users: views, orders,
// pages and identify calls, with properties as real clients send them.
func benchEvent(r *rand.Rand, i, users int) string {
	u := "user-" + strconv.Itoa(r.IntN(users))
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	switch i % 10 {
	case 0:
		return fmt.Sprintf(`{"type":"identify","userId":%q,"messageId":"m%d","traits":{"plan":%q,"country":%q,"email":"%s@example.com"},"timestamp":%q}`,
			u, i, benchPlans[r.IntN(3)], benchCountries[r.IntN(4)], u, ts)
	case 1, 2:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Order Completed","properties":{"revenue":%d,"currency":"USD","orderId":"o-%d"},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"}},"timestamp":%q}`,
			u, i, r.IntN(300), i, ts)
	case 3, 4, 5, 6:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Product Viewed","properties":{"sku":"sku-%d","category":%q,"price":19.99},"context":{"ip":"203.0.113.9"},"timestamp":%q}`,
			u, i, r.IntN(1000), benchCategories[r.IntN(5)], ts)
	default:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Page Viewed","properties":{"path":"/p/%d"},"timestamp":%q}`, u, i, r.IntN(50), ts)
	}
}

// For the external tests' benchmarks.
var (
	BenchConfig = benchConfig
	BenchEvent  = benchEvent
)
