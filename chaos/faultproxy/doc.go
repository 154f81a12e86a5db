// Package faultproxy is a small HTTP reverse proxy that injects faults on
// the wire, for the chaos campaign (issue 18: "real S3 trouble below the
// SDK", "a slow or 5xx incus API"). It sits between a client (our S3 store,
// our incus client, a daemon) and a server (MinIO over TCP, incusd over its
// unix socket), so the SDK's retries and our timeouts meet the faults for
// real.
//
// It listens on a TCP address or a unix socket path and forwards to a TCP
// address or a unix socket path. Keep-alive, streaming bodies (both ways)
// and long-polls pass through unchanged; the Host header is kept, so SigV4
// signatures made for the proxy's address stay valid.
//
// Faults are armed at runtime with Arm (safe for concurrent use), each for
// a number of requests (Count), for a time (For), or until Disarm, and
// optionally only for one HTTP method and path prefix:
//
//   - Status: the proxy answers itself with a status and body (S3SlowDown,
//     S3InternalError, IncusError build the servers' own error shapes);
//   - Latency: the request waits Delay before it is forwarded;
//   - Reset: forwarded, then the connection is cut (RST) after the headers,
//     after some body bytes, or before any byte of the answer;
//   - Truncate: a GET's 200/206 body ends early with a clean close, short of
//     its Content-Length;
//   - Down: the listener is closed (connection refused) and every open
//     connection cut, for a time: a restart or a crash as a client sees it;
//   - Blackhole: requests are accepted and never answered, and answers
//     already streaming stall, for a time: a partition.
//
// Stats counts the requests seen and forwarded and the faults applied per
// kind, for the campaign's report.
//
// Layer: chaos. It imports drivers/clock only (and zerolog).
package faultproxy
