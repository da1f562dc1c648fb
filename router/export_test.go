package router

// BenchFilters are the 10 destination filters of the router's benchmarks, for the service's
// throughput benchmark (package router_test).
const BenchFilters = benchFilters
