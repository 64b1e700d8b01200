// Package wire is the OpenAI-compatible API as rlpipe's two clients of it
// speak it, the policy client (policy/openai) and the reward judges
// (rewards/judge): the request and response bodies of /completions and
// /chat/completions, the error body, and Send, the one HTTP exchange both
// make for each attempt. What an answer means for the next attempt is
// policy/openai/retry's rule, shared too; what an attempt's failure says
// to the user stays with each client, which knows its own keys and next
// steps.
//
// A body is encoded the same way for both clients: fields that are zero
// and mean "the server's default" are left out (n, max_tokens, top_p,
// stop, logprobs), a temperature is always sent (0 is greedy, absent is
// 1), and a seed is sent when one is set (Seed is a pointer: the policy
// client always sets it, a judge only when its config names one).
//
// Send does one attempt:
//
//	reply, err := wire.Send(ctx, httpClient, wire.Call{Method: http.MethodPost,
//		URL: base + "/v1/chat/completions", Body: body, APIKey: key, Timeout: time.Minute, MaxBody: 8 << 20})
//	switch {
//	case errors.Is(err, wire.ErrTimeout): // no answer within Timeout: retry
//	case errors.As(err, new(*wire.RequestError)): // no request was made: do not retry
//	case err != nil: // no answer (refused, reset, DNS) or ctx ended: retry unless ctx is done
//	}
//	d := retry.Status(reply.Status, reply.Header, reply.Body, time.Now())
//
// Its errors never carry the URL: net/http's copy would show a query
// that may hold a credential, and the caller names the endpoint as it
// shows it. Neither are the API key's bytes redacted here: the caller,
// which knows the key, redacts what it shows.
package wire
