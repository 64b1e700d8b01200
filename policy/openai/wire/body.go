package wire

import (
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/toolcall"
)

// CompletionRequest is the body of POST /completions.
type CompletionRequest struct {
	Model string `json:"model,omitempty"`
	// Prompt is the prompt's text (a string) or its token ids (a []int32,
	// sent as a list of ids, which vLLM continues as they are).
	Prompt      any      `json:"prompt"`
	N           int      `json:"n,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Temperature float64  `json:"temperature"` // always sent: 0 is greedy, absent is 1
	TopP        float64  `json:"top_p,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// Logprobs k asks for the sampled token's log-probability and the k
	// most likely tokens; 1 when only the sampled one is wanted (llama.cpp
	// returns none for 0), its alternative then ignored.
	Logprobs int `json:"logprobs,omitempty"`
	// vLLM: logprob tokens as "token_id:1234", and the sampled ids in
	// choices[].token_ids.
	TokensAsIDs    bool `json:"return_tokens_as_token_ids,omitempty"`
	ReturnTokenIDs bool `json:"return_token_ids,omitempty"`
}

// ChatRequest is the body of POST /chat/completions.
type ChatRequest struct {
	Model          string           `json:"model,omitempty"`
	Messages       []policy.Message `json:"messages"`
	N              int              `json:"n,omitempty"`
	Seed           *int64           `json:"seed,omitempty"`
	Temperature    float64          `json:"temperature"`
	TopP           float64          `json:"top_p,omitempty"`
	MaxTokens      int              `json:"max_tokens,omitempty"`
	Stop           []string         `json:"stop,omitempty"`
	Logprobs       bool             `json:"logprobs,omitempty"`
	TopLogprobs    *int             `json:"top_logprobs,omitempty"`
	TokensAsIDs    bool             `json:"return_tokens_as_token_ids,omitempty"`
	ReturnTokenIDs bool             `json:"return_token_ids,omitempty"`
	// Tools and ToolChoice are sent only when set, so a request without
	// tools is the bytes it always was.
	Tools      []toolcall.Tool `json:"tools,omitempty"`
	ToolChoice string          `json:"tool_choice,omitempty"`
}

// Response is what the clients read of a completions or chat answer.
type Response struct {
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
	// PromptTokenIDs are the prompt's token ids, as the server's template
	// and tokenizer made them: vLLM's return_token_ids puts them here in
	// a chat answer, and in each choice of a completions answer.
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
}

// Usage is an answer's token counts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Choice is one completion of an answer.
type Choice struct {
	Index    int          `json:"index"`
	Text     string       `json:"text"`    // completions
	Message  *ChatMessage `json:"message"` // chat
	Logprobs *struct {
		// completions
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"` // up to k+1: the sampled token is added
		// chat
		Content []struct {
			Token       string   `json:"token"`
			Logprob     *float64 `json:"logprob"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"content"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	// StopReason is vLLM's: the stop string that ended the text, or the id
	// of a stop token (a number).
	StopReason any     `json:"stop_reason"`
	TokenIDs   []int32 `json:"token_ids"` // vLLM's return_token_ids
	// PromptTokenIDs: a completions choice's prompt token ids (vLLM's
	// return_token_ids).
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
}

// ChatMessage is a chat choice's message: its text, or the model's
// refusal (OpenAI's structured refusal; content is then null).
type ChatMessage struct {
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// ToolCalls are the calls a server that parses them found (vLLM
	// with --tool-call-parser, rlpipe policy serve); content is then the
	// text before them, or null.
	ToolCalls []toolcall.Wire `json:"tool_calls"`
}

// APIError is an error body, OpenAI's {"error": {...}} or vLLM's older
// flat {"object": "error", "message": ...}.
type APIError struct {
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	} `json:"error"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// Text is the error's message and type, from either shape.
func (e APIError) Text() (msg, typ string) {
	if e.Error != nil {
		return e.Error.Message, e.Error.Type
	}
	return e.Message, e.Type
}
