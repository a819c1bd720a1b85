#!/usr/bin/env python3
"""A differential corpus for chat/jinja: random templates rendered by Python's jinja2.

Generates three kinds of random templates from fixed seeds — whitespace control (text, tags
and comments with -/+ modifiers, trim_blocks and lstrip_blocks at work), expressions (operators,
filters, tests, str/dict methods, subscripts over Python values), and statements (loops, ifs,
namespaces, macros, loop controls over a chat conversation) — renders each with jinja2 in
HuggingFace's environment (as tools/render_templates.py builds it), and writes the results
gzipped as JSON. chat/jinja's TestCorpus renders them all and compares: the same text, or the
same exception class. Usage:

  python3 tools/jinja_corpus.py -o chat/jinja/testdata/corpus.json.gz
"""
import argparse
import copy
import gzip
import json
import random
import sys
from datetime import datetime

import jinja2

sys.path.insert(0, __import__("os").path.dirname(__file__))
from render_templates import replicated_compile  # noqa: E402

NOW = datetime(2026, 11, 24, 15, 4, 5)

EXPR_VARS = {"x": 7, "y": -2.5, "s": " Hello, Wörld! ", "l": [3, 1, 2, 1], "d": {"b": 1, "a": [1, 2], "k": "v"},
             "n": None, "t": True, "e": "", "z": 0, "f": 1.0,
             "m": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]}

CHAT_VARS = {
    "messages": [{"role": "system", "content": " Sys "}, {"role": "user", "content": "Hi <think>a</think>b"},
                 {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [1.5, "x"]}}}]},
                 {"role": "tool", "content": "{\"r\": 2}"}, {"role": "user", "content": "Ünï\n"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "D", "parameters": {"type": "object",
              "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}, "required": ["a"]}}}],
    "add_generation_prompt": True, "bos_token": "<s>", "flag": False, "num": 3}


def whitespace_template(rnd):
    text = ["a", "b ", " ", "  ", "\t", "\n", "\n\n", " \n", "\r\n", "x\n  ", "é", "\u3000", "\x0c"]

    def mod():
        return rnd.choice(["", "", "-", "+"])

    def end():
        return rnd.choice(["", "-", "+"])

    def tag(depth):
        k = rnd.random()
        if k < 0.25:
            return "{{" + mod() + " 'v' " + rnd.choice(["", "-"]) + "}}"
        if k < 0.45:
            return "{%" + mod() + " if true " + end() + "%}" + body(depth) + "{%" + mod() + " endif " + end() + "%}"
        if k < 0.6:
            return "{%" + mod() + " for i in [1,2] " + end() + "%}" + body(depth) + "{%" + mod() + " endfor " + end() + "%}"
        if k < 0.75:
            return "{#" + mod() + " c " + end() + "#}"
        if k < 0.85:
            return "{%" + mod() + " set z = 1 " + end() + "%}"
        return "{%" + mod() + " raw " + rnd.choice(["", "-"]) + "%}" + "".join(rnd.choice(text) for _ in range(3)) + "{{ y }}{%" + mod() + " endraw " + end() + "%}"

    def body(depth):
        out = []
        for _ in range(rnd.randint(1, 5)):
            if depth > 0 and rnd.random() < 0.4:
                out.append(tag(depth - 1))
            else:
                out.append("".join(rnd.choice(text) for _ in range(rnd.randint(0, 3))))
        return "".join(out)

    return body(3)


def expression_template(rnd):
    lits = ["1", "0", "-3", "2.5", "1e3", "'ab'", '"q\\"t"', "'é'", "none", "true", "false", "[1, 'a']", "{'k': 1}", "()", "(1,)", "''"]
    names = list(EXPR_VARS) + ["u"]
    filters = ["length", "upper", "lower", "trim", "first", "last", "list", "sort", "join", "join(', ')", "tojson", "string", "int",
               "float", "abs", "default('D')", "reverse", "unique", "items", "dictsort", "map('string')", "select", "title",
               "capitalize", "replace('l', 'L')", "sum", "max", "min", "count", "wordcount", "e", "indent(2)", "tojson(indent=1)",
               "batch(2)", "round", "selectattr('role', 'equalto', 'user')", "map(attribute='role')", "reject", "center(9)", "truncate(5)"]
    methods = [".upper()", ".lower()", ".split()", ".split(',')", ".strip()", ".lstrip('H ')", ".get('a')", ".get('q', 3)", ".items()",
               ".keys()", ".values()", ".startswith('H')", ".endswith('!')", ".replace('l', '')", ".find('o')", ".count('l')",
               ".title()", ".capitalize()", ".index(1)", "[0]", "[-1]", "[1:]", "[::-1]", "['a']", ".a", ".role", "[0].role", ".content"]
    ops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", "in", "not in", "and", "or"]
    tests = ["defined", "none", "string", "number", "mapping", "iterable", "sequence", "odd", "even", "integer", "float",
             "boolean", "true", "false", "lower", "upper"]

    def expr(d):
        r = rnd.random()
        if d <= 0 or r < 0.3:
            return rnd.choice(lits + names)
        if r < 0.45:
            return "(" + expr(d - 1) + " " + rnd.choice(ops) + " " + expr(d - 1) + ")"
        if r < 0.65:
            return expr(d - 1) + "|" + rnd.choice(filters)
        if r < 0.8:
            return rnd.choice(names) + rnd.choice(methods)
        if r < 0.87:
            return "(" + expr(d - 1) + " if " + expr(d - 1) + " else " + expr(d - 1) + ")"
        if r < 0.93:
            return "not " + expr(d - 1)
        return expr(d - 1) + " is " + rnd.choice(tests)

    return "{{ " + expr(3) + " }}"


def statement_template(rnd):
    exprs = ["message.role", "message.content", "message['content']", "message.tool_calls", "message.get('tool_calls')", "loop.index",
             "loop.index0", "loop.first", "loop.last", "loop.length", "loop.revindex", "loop.previtem.role", "loop.nextitem is defined",
             "ns.n", "ns.s", "messages|length", "messages[0].role", "messages[-1].content", "tools|tojson",
             "tools[0].function.parameters.properties|items|list", "message.content|trim", "(message.content or '')|length",
             "message.content is string", "message.content is none", "message.tool_calls is defined", "'think' in (message.content or '')",
             "(message.content or '').split('</think>')[-1]", "message|tojson", "message.role|upper", "bos_token", "add_generation_prompt",
             "flag", "num * 2", "x", "k", "v", "m(message.role)", "m(k, 'z')", "messages|selectattr('role', 'equalto', 'user')|list|length",
             "messages|map(attribute='role')|join(',')", "tool.function.name", "tool['function']['parameters']['required']",
             "message.content.startswith('Hi')", "range(num)|list", "loop.cycle('a', 'b')"]
    conds = ["message.role == 'user'", "message.content", "loop.first", "not loop.last", "message.tool_calls is defined", "ns.n > 2",
             "flag", "message.role in ['system', 'tool']", "message.content is string and message.content.strip()",
             "loop.index0 % 2 == 0", "x is defined", "tools", "k == 'role'", "v is string"]

    def usable(e, ctx):
        for n in ("message", "loop", "tool", "x", "k", "v"):
            uses = e == n or any(p in e for p in (n + ".", n + "[", n + "|", "(" + n, n + " ", n + ")"))
            if uses and n not in ctx:
                return False
        return True

    def pick(choices, ctx):
        ok = [e for e in choices if usable(e, ctx)]
        return rnd.choice(ok) if ok else "num"

    def stmt(d, ctx):
        r = rnd.random()
        if d <= 0 or r < 0.35:
            return rnd.choice(["{{ " + pick(exprs, ctx) + " }}", "text ", "\n", "  ", "{{- " + pick(exprs, ctx) + " -}}", "|"])
        if r < 0.5:
            return ("{% if " + pick(conds, ctx) + " %}" + body(d - 1, ctx) +
                    rnd.choice(["", "{% else %}" + body(d - 1, ctx), "{% elif " + pick(conds, ctx) + " %}" + body(d - 1, ctx)]) + "{% endif %}")
        if r < 0.62:
            it = rnd.choice(["messages", "messages[1:]", "messages[::-1]", "messages|reverse", "messages|selectattr('content')", "range(3)"])
            var = "x" if "range" in it else "message"
            return ("{%- for " + var + " in " + it + rnd.choice(["", " if loop is not defined"]) + " %}" + body(d - 1, ctx | {var, "loop"}) +
                    rnd.choice(["", "{% if loop.index == 2 %}{% break %}{% endif %}", "{% if loop.first %}{% continue %}{% endif %}"]) + "{% endfor %}")
        if r < 0.7:
            src = rnd.choice(["messages[2].tool_calls[0].function.arguments.items()", "tools[0].function.parameters.properties|dictsort",
                              "{'role': 'r', 'n': 1}|items"])
            return "{% for k, v in " + src + " %}" + body(d - 1, ctx | {"k", "v", "loop"}) + "{% endfor %}"
        if r < 0.78:
            if rnd.random() < 0.5:
                return "{% set ns.n = ns.n + " + pick(["1", "loop.index", "num"], ctx) + " %}"
            return "{% set ns.s = ns.s ~ " + pick(exprs, ctx) + " %}"
        if r < 0.85:
            return "{% set x = " + pick(exprs, ctx) + " %}" + body(d - 1, ctx | {"x"})
        if r < 0.9:
            return "{% for tool in tools %}" + body(d - 1, ctx | {"tool", "loop"}) + "{% endfor %}"
        if r < 0.93:
            if rnd.random() < 0.1:
                return "{{ raise_exception('boom ' ~ " + pick(exprs, ctx) + ") }}"
            return "{% set y = " + pick(exprs, ctx) + " %}{{ y }}"
        return "{%- if true -%}\n  " + body(d - 1, ctx) + "\n{%- endif %}"

    def body(d, ctx):
        return "".join(stmt(d, ctx) for _ in range(rnd.randint(1, 4)))

    return "{% macro m(a, b='B') %}<{{ a }}|{{ b }}>{% endmacro %}{% set ns = namespace(n=0, s='') %}" + body(4, frozenset()) + "{{ ns.n }}{{ ns.s }}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--whitespace", type=int, default=1000)
    ap.add_argument("--expressions", type=int, default=3000)
    ap.add_argument("--statements", type=int, default=600)
    args = ap.parse_args()
    groups = [("whitespace", whitespace_template, args.whitespace, {}),
              ("expression", expression_template, args.expressions, EXPR_VARS),
              ("statement", statement_template, args.statements, CHAT_VARS)]
    doc = {"generator": {"script": "tools/jinja_corpus.py", "jinja2": jinja2.__version__}, "vars": {}, "cases": []}
    for seed, (kind, make, n, variables) in enumerate(groups, start=1):
        rnd = random.Random(seed)
        doc["vars"][kind] = variables
        for _ in range(n):
            src = make(rnd)
            case = {"kind": kind, "template": src}
            try:
                # A filter may change a value in place (jinja2's indent does +=): each render gets a copy.
                case["output"] = replicated_compile(src, NOW).render(**copy.deepcopy(variables))
            except Exception as e:  # the class is what the Go test compares
                case["error"] = type(e).__name__
            doc["cases"].append(case)
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as z:
        z.write(json.dumps(doc, ensure_ascii=False).encode("utf-8"))
    print(f"{len(doc['cases'])} templates with jinja2 {jinja2.__version__} -> {args.out}")


if __name__ == "__main__":
    main()
