#!/usr/bin/env python3
"""The independent oracle of chapter 08's tokenizer: Hugging Face `tokenizers` built from the
vocabulary and merges of a GGUF file (read with PyPI `gguf`, llama.cpp's own reader), configured as
SmolLM2's tokenizer.json is:

  - model: BPE over the file's tokens and merges (rank = index), no dropout, no byte fallback,
    merges not skipped for words already in the vocabulary (ignore_merges off);
  - pre-tokenizer: Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False,
    use_regex=True)] — every numeric character alone (Rust char::is_numeric: categories Nd, Nl,
    No), then the GPT-2 pattern (Oniguruma, the wheel's regex engine) and the byte-to-symbol map;
  - no normalizer, no post-processor (nothing is added: no BOS);
  - the control and user-defined tokens (types 3 and 4) as special added tokens, none
    normalized, stripped or single-word: cut out of the text leftmost-longest before
    pre-tokenizing. parse_special = false sets encode_special_tokens, which encodes them as plain
    text (the rule of runtime/tokenizer/bpe_tokenizer.h; SmolLM2 has only control ones).

    tokenizer_oracle.py MODEL.gguf TEXTS.json

TEXTS.json is a list of {"text": str, "parse_special": bool}; prints one JSON list with the ids of
each text, in order. Exit status 2 with a message when a package or the file is missing.
"""
import json
import sys

try:
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
except ImportError as error:  # the venv of ./inferlab setup holds both
    sys.exit(f"tokenizer_oracle.py: {error} (run ./inferlab setup)")


def strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def integers(reader, key):
    field = reader.fields[key]
    return [int(field.parts[i][0]) for i in field.data]


def build(path):
    reader = gguf.GGUFReader(path)
    tokens = strings(reader, "tokenizer.ggml.tokens")
    types = integers(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in strings(reader, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False, ignore_merges=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    added = [AddedToken(tokens[i], special=True, normalized=False, lstrip=False, rstrip=False,
                        single_word=False) for i in range(len(tokens)) if types[i] in (3, 4)]
    tokenizer.add_tokens(added)
    for token in added:  # added tokens must keep the file's ids
        assert tokenizer.token_to_id(token.content) == vocab[token.content], token.content
    return tokenizer


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tokenizer = build(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        items = json.load(f)
    out = []
    for item in items:
        tokenizer.encode_special_tokens = not item["parse_special"]
        out.append(tokenizer.encode(item["text"], add_special_tokens=False).ids)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
