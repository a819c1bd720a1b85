# Regenerates pretokenize.json: pre-tokenizer splits of random strings by
# Python's `regex` module (backtracking, look-ahead, \p classes), the
# reference for the hand scanners in tokenizer/pretokenize.go.
#   python3 testdata/tokenizer/pretokenize_gen.py > testdata/tokenizer/pretokenize.json
import json, random, sys
import regex

pats = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "gpt-4o": r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
alpha = list("aAbZzsStTrReEvVlLmMdD'''  \t\n\r\n/.,!?-_0123456789") + [
    "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c", "é", "É", "ǅ", "ʰ", "ー", "\u0301",
    "\u0308", "\u093f", "中", "文", "한", "ا", "Ⅻ", "½", "٣", "😀", "❤", "ß", "ſ", "ǈ", "Ω", "ω",
    "\u1680", "\u200d", "々", "〆"]
random.seed(7)
cases = ["Hello world", "don't", "IT'S", "'ſ", "HeLLo", "  hello", " \t \n ", "a\r\n\r\n b", "x  ",
         "\u0301abc", "ABC'S", "1234567", "a/b//\n", "  \n  x"]
while len(cases) < 1500:
    cases.append("".join(random.choice(alpha) for _ in range(random.randint(1, 14))))
out = {"cases": cases, "splits": {}}
for name, p in pats.items():
    r = regex.compile(p)
    out["splits"][name] = [[m.group(0) for m in r.finditer(c)] for c in cases]
json.dump(out, sys.stdout, ensure_ascii=False, separators=(",", ":"))
