// Package chattemplate renders a Hugging Face chat template turn by turn,
// for episodes run token-in/token-out (environments.Renderer).
//
// A thinking model's template re-renders history: Qwen3's keeps <think>
// only in the replies after the last user message, so once an episode's
// next observation arrives, the chat path's prompt no longer begins with
// the tokens the policy sampled, and the episode cannot be trained on.
// With a Renderer the runner holds the episode's exact tokens and asks
// Suffix only for what follows them: after a reply, the template renders
// a fixed base conversation (a user message and a stand-in reply) and the
// new messages, and the text after the stand-in reply's content — the
// template's end of the turn, the new messages, the generation prompt —
// is tokenized; the end-of-turn token the reply already sampled is not
// repeated. Earlier turns are never rendered again, whatever the template
// does to them.
//
//	r, err := chattemplate.Start(ctx, &chattemplate.Options{
//		Python:    ".venv-py/bin/python",    // tokenizers, jinja2, transformers
//		Tokenizer: "models/Qwen3-0.6B",      // tokenizer.json, tokenizer_config.json
//	})
//	defer r.Close()
//	runner, err := environments.NewRunner(p, &environments.RunnerOptions{Renderer: r})
//
// The rendering and the tokenizing run in one Python worker per Renderer
// (render.py, embedded): the template through transformers'
// render_jinja_template, the text through the tokenizers library's
// tokenizer.json without added special tokens, as vLLM tokenizes a
// rendered chat prompt. The worker's prints go to stderr, never to the
// protocol; a worker that dies is started again at the next call, and the
// call that saw it die fails with ErrWorker (an ErrInfra: the episode is
// infra_error). A template that raises, or text the tokenizer refuses, is
// ErrTemplate (env_error).
package chattemplate
