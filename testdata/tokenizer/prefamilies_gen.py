# Regenerates prefamilies.json.gz: how every pre-tokenizer family of
# tokenizer/prefamilies.go splits a set of strings, computed with Python's
# `regex` module (a backtracking engine with look-ahead and Unicode
# properties, as HF's Oniguruma) applying each family's regex chain the
# way HF's Split(behavior="Isolated") and llama.cpp's unicode_regex_split
# do: every match and every stretch between matches is a piece, and each
# regex cuts the pieces of the one before.
#   python3 testdata/tokenizer/prefamilies_gen.py | gzip -9n > testdata/tokenizer/prefamilies.json.gz
import gzip, json, random, sys
import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
O200K = r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

DS_LETTERS = ("A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134"
    "\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf"
    "\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943")
DS_PUNCT = "!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002"
DS_CJK = "\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff"
DS_V3_CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"
PORO = " ?[^(\\s|.,!?" + "\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c" + ")]+"
YOUTU_CJK = ("[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|["
    + DS_V3_CJK + "]+")
AFMOE_CJK = ("[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf"
    "\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+")
ASCII_PUNCT = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"""
AFMOE_DIGITS = r"\p{AFMoE_digits}"

FAMILIES = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt-2": [GPT2],
    "llama3": [CL100K],
    "dbrx": [CL100K],
    "chatglm4": [CL100K],
    "qwen2": [QWEN2],
    "qwen2-regex": [QWEN2],
    "gpt-4o": [O200K],
    "starcoder": [r"\p{N}", GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "deepseek-llm": [r"[\r\n]", r"\s?[" + DS_LETTERS + "]+", r"\s?[" + DS_PUNCT + "]+", r"\s+$", "[" + DS_CJK + "]+", r"\p{N}+"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[" + DS_CJK + "]+", r"\p{N}"],
    "deepseek-v3": [r"\p{N}{1,3}", "[" + DS_V3_CJK + "]+",
        ASCII_PUNCT + r"[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "spark2_5": [r"\p{N}{1,3}", "[" + DS_V3_CJK + "]+",
        ASCII_PUNCT + r"[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+", r"\p{N}"],
    "youtu": [YOUTU_CJK,
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen35": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "poro": [PORO],
    "viking": [PORO, r"\p{N}"],
    "tekken": [r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "chameleon": [r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", r"([\t\n]|    |  )", r"\p{N}", r"[\p{P}!-/:-@\[-`{-~]", GPT2],
    "tiny_aya": [r"\d{1,3}(?=(?:\d{3})*\b)", O200K],
    "kimi-k2": [r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "superbpe": [r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
    "bailingmoe": [r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"],
    "seed-coder": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "ufakzeka": [r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "afmoe": [AFMOE_DIGITS, AFMOE_CJK,
        ASCII_PUNCT + r"[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "laguna": [r"[^\n]+|[\n]+", QWEN2],
    "exaone-moe": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"],
    "minicpm5": [r"\p{N}{1,3}", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "jais-2": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}"],
}


def afmoe_digits(piece):
    # llama.cpp's unicode_regex_split_custom_afmoe: runs of \p{N} end in
    # groups of three, the remainder first; the text before a run stays
    # with its first group, a piece ends after every run.
    out, prev, i = [], 0, 0
    isnum = lambda c: regex.match(r"\p{N}", c) is not None
    while i < len(piece):
        if not isnum(piece[i]):
            i += 1
            continue
        a = i
        while i < len(piece) and isnum(piece[i]):
            i += 1
        n = i - a
        cur = a
        if n % 3:
            out.append(piece[prev:a + n % 3]); prev = cur = a + n % 3
        while cur < i:
            out.append(piece[prev:cur + 3]); prev = cur = cur + 3
    if prev < len(piece):
        out.append(piece[prev:])
    return out


def split_chain(text, pats):
    pieces = [text]
    for p in pats:
        nxt = []
        for piece in pieces:
            if p == AFMOE_DIGITS:
                nxt += [x for x in afmoe_digits(piece) if x]
                continue
            flags = regex.V1 if "&&" in p else regex.V0
            last = 0
            for m in regex.finditer(p, piece, flags):
                if m.start() > last:
                    nxt.append(piece[last:m.start()])
                if m.end() > m.start():
                    nxt.append(m.group())
                last = m.end()
            if last < len(piece):
                nxt.append(piece[last:])
        pieces = nxt
    assert "".join(pieces) == text
    return pieces


alpha = list("aAbZzsStTrReEvVlLmMdDkK'''  \t\n\r\n/.,!?-_~`$+<=>^|:;\"#%&*()[]{}@\\0123456789") + [
    "\u00a0", "\u3000", "\u2028", "\u0085", "\u1680", "\u000b", "\u000c", "é", "É", "ß", "ſ", "ǅ", "ʰ",
    "ƻ", "ǀ", "ʔ", "Ω", "ω", "\u1f7d", "\u1fd3", "\u1fbe", "\u2126", "\u212a", "ж", "Ж", "ա", "Ⴀ", "Ꭰ", "ꭰ",
    "Ａ", "ａ", "！", "～", "＃", "‘", "’", "“", "”", "—", "…", "。", "，", "、", "।", "۔", "،",
    "中", "文", "一", "\u9fa5", "\uf900", "𠀀", "々", "〆", "한", "ㄱ", "ㆎ", "ㄅ", "あ", "ゟ", "ア", "ー",
    "\uff65", "ｱ", "\u2f00", "เ", "ก", "๑", "ກ", "ក", "က", "၁", "٣", "０", "Ⅻ", "½", "²",
    "\u0301", "\u0308", "\u093f", "\u200d", "\u200c", "‿", "😀", "❤", "🦙", "©", "€",
    "<sentinel:", "IMGIMG", "Z", "B", "I", "    ", "\n\n", "123", "4567"]
random.seed(18)
cases = ["3333", "33333333", "Hello world", " Hello, world!", "don't DON'T 'ſ", "I'M here", "1234567",
         "x   y", "x  \n\n  y", "end  ", "  \n  x", "a\r\n\r\n b", "HeLLo WORLD's", "a/b//\n",
         "123abc 4567. 89", "٣٣٣٣ ０００", "12½345", "中文字符 かな カナ 한국어", "naïve café",
         "<sentinel:12> IMGIMGABZ x", "\t\tx\n    y  z", "🦙.cpp 😀😀", "~`$+<=>^|", "  ", ""]
while len(cases) < 800:
    cases.append("".join(random.choice(alpha) for _ in range(random.randint(1, 16))))

out = {"cases": cases, "families": {}}
for name, pats in FAMILIES.items():
    ends = []
    for c in cases:
        pos, e = 0, []
        for piece in split_chain(c, pats):
            pos += len(piece.encode())
            e.append(pos)
        ends.append(e)
    out["families"][name] = {"patterns": pats, "ends": ends}
sys.stdout.write(json.dumps(out, ensure_ascii=False, separators=(",", ":")))
