package main

import (
	"context"
	"sync"
	"time"

	"estate/demo"
)

// bucketMS is the width of the time slices the load command counts replies in (the Java estate
// consumer's BUCKET_MS, so a test reads both alike).
const bucketMS = 250

// load is "load THREADS MILLIS [name=X]": THREADS goroutines call SayHello back to back for
// MILLIS ms (a fault is injected meanwhile), every call counted, none dropped. Its result has
// the Java estate consumer's shape: calls, replies by the provider address that answered,
// failures by what the caller saw, when (ms after the start) each provider last answered, the
// first and last failure, and each provider's replies per 250 ms.
func load(greeter demo.Greeter, threads, millis int, name string) map[string]interface{} {
	var mu sync.Mutex
	ok := map[string]int{}
	errs := map[string]int{}
	lastOK := map[string]int64{}
	perBucket := map[string][]int{}
	errorMS := []int64{}
	buckets := millis/bucketMS + 1
	start := time.Now()
	end := start.Add(time.Duration(millis) * time.Millisecond)
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			request := &demo.HelloRequest{Name: name}
			for time.Now().Before(end) {
				reply, err := greeter.SayHello(context.Background(), request)
				at := time.Since(start).Milliseconds()
				mu.Lock()
				if err != nil {
					errs[describe(err)]++
					errorMS = append(errorMS, at)
				} else {
					provider := reply.GetProvider()
					ok[provider]++
					if at > lastOK[provider] {
						lastOK[provider] = at
					}
					if perBucket[provider] == nil {
						perBucket[provider] = make([]int, buckets)
					}
					perBucket[provider][min(int64(buckets-1), at/bucketMS)]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	calls := len(errorMS)
	for _, n := range ok {
		calls += n
	}
	window := []int64{}
	if len(errorMS) > 0 {
		first, last := errorMS[0], errorMS[0]
		for _, at := range errorMS {
			first, last = min(first, at), max(last, at)
		}
		window = []int64{first, last}
	}
	return map[string]interface{}{
		"calls":        calls,
		"ok":           ok,
		"errors":       errs,
		"last_ok_ms":   lastOK,
		"ok_per_250ms": perBucket,
		"error_ms":     window,
	}
}
