// Package extproctest plays Envoy's ext_proc HTTP filter against an
// ExternalProcessor gRPC server, so that ext_proc servers (the BBR, the EPP) can be
// tested end to end without Envoy.
//
// A Client sends each Request on its own stream the way Envoy does: request
// headers, then the body either in FULL_DUPLEX_STREAMED chunks (sent without
// waiting for replies, end_of_stream on the last), BUFFERED as one message after
// the headers reply, or STREAMED in chunks after the headers reply, then
// trailers if any; then, optionally, the upstream's response the same way. It applies the replies with Envoy's rules and returns a
// Result:
//
//   - header mutations: removals before sets, raw_value only (a header sent in
//     value arrives empty), append_action and the deprecated append flag, the
//     default mutation rules (host, :authority, :scheme, :method and x-envoy-*
//     are not modifiable; pseudo-headers and host cannot be removed), invalid
//     names or values fail the request;
//   - header mutations in a body reply apply only in BUFFERED mode;
//   - in FULL_DUPLEX_STREAMED mode every body reply must be a streamed_response;
//     the chunks are concatenated into the forwarded body, and content-length
//     is dropped from the forwarded headers;
//   - in BUFFERED mode a body mutation must match content-length if present;
//   - in STREAMED mode each chunk gets one body reply, in order, which may
//     replace the chunk but not be a streamed_response (Envoy rejects it), and
//     whose header mutation is ignored;
//   - clear_route_cache counts only on the request path and only together with a
//     header_mutation in the same reply;
//   - dynamic metadata is merged per namespace; an ImmediateResponse ends the
//     exchange (status defaults to 200, content-type text/plain unless mutated).
//
// Anything Envoy would reject (a reply out of order, a body reply before the
// headers reply, a message after the exchange ended) is returned as an error;
// anything Envoy would drop silently is listed in Result.Ignored.
//
// An HTTP front that proxies real traffic (a test gateway playing Envoy) uses
// Client.Begin instead: it plays the request path, the front forwards the
// result upstream, and Live.Respond passes the upstream's response through the
// server as it arrives, writing the server's replies to the client.
//
// Typical use in a test:
//
//	c := extproctest.Start(t, myServer, extproctest.Config{})
//	res, err := c.Process(ctx, extproctest.PostJSON("/v1/chat/completions", body))
//	if err != nil { t.Fatal(err) }
//	if got := res.RequestHeaders.Get("x-gateway-model-name"); got != "llama" { ... }
//	if !res.RouteCacheCleared { ... }
package extproctest
