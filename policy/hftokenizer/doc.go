// Package hftokenizer spells token ids as text from a Hugging Face
// tokenizer.json: the reverse of a tokenizer, for showing a sequence a
// policy served elsewhere (vLLM, an OpenAI-compatible server) produced.
//
// It reads the vocabulary (model.vocab, as a map or as Unigram's list of
// [piece, score] pairs, and added_tokens, which win) and the decoders users
// meet:
//
//   - ByteLevel (GPT-2, Llama 3, Qwen): each character of a token stands
//     for one byte (GPT-2's byte-to-unicode table, inverted).
//   - Metaspace (SentencePiece BPE/Unigram): "▁" is a space.
//   - Replace, ByteFallback, Fuse, Strip, in a Sequence (Llama 2, Mistral):
//     "▁" replaced by a space and a "<0xNN>" token is the byte NN.
//
// A token is spelled as it reads in the middle of a sequence: "▁the" is
// " the", where tokenizers' decode([id]) drops that space as the start of
// a text. A token whose bytes are not valid UTF-8 (a part of a multi-byte
// character) shows each byte escaped, "\xe4", instead of the U+FFFD that
// decode gives. An id outside the vocabulary is "<id N>".
//
// Only decoding is implemented: no normalizer, pre-tokenizer or merges.
package hftokenizer
