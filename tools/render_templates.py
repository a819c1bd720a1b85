#!/usr/bin/env python3
"""Golden chat-template renderings, as HuggingFace's apply_chat_template makes them.

Renders every chat template given (Jinja files, and tokenizer_config.json files that carry a
"chat_template") over the battery of conversations in testdata/chat/conversations.json, and
writes one JSON file that package chat's tests hold ringlm's renderer to, byte for byte.

Rendering is transformers' own when it is importable (its _compile_jinja_template and
render_jinja_template, as tokenizer.apply_chat_template calls them); otherwise this script builds
the same environment itself: jinja2's ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and the loopcontrols extension, the globals raise_exception and strftime_now, and
tojson overridden by json.dumps with ensure_ascii=False. Either way strftime_now sees the
battery's fixed time, and continue_final_message is handled as render_jinja_template does.

The template variables are messages, tools (None when a conversation has none), documents
(None), add_generation_prompt, and bos_token/eos_token where the model has them: the variables a
GGUF file can supply. No network is used. Usage:

  python3 tools/render_templates.py --conversations testdata/chat/conversations.json \\
      --templates ../shared/testdata/llamacpp/templates --templates testdata/chat/templates \\
      --tokenizers ../shared/testdata/tokenizers -o testdata/chat/golden/templates.json

With --snippets FILE it instead renders the engine's unit snippets (chat/jinja/testdata/snippets.json)
in the same environment, for package chat/jinja's tests:

  python3 tools/render_templates.py --snippets chat/jinja/testdata/snippets.json \\
      -o chat/jinja/testdata/snippets.golden.json
"""
import argparse
import copy
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.exceptions import TemplateError

CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


def replicated_compile(source, now):
    """The environment of transformers' _compile_jinja_template. Its {% generation %} tag marks
    assistant text for training masks; when rendering it outputs its body, as here."""
    from jinja2.ext import Extension
    from jinja2.nodes import CallBlock
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env.from_string(source)


def transformers_compile():
    """transformers' compiler, or None when transformers is not importable."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except Exception:
        return None, None
    import transformers

    return _compile_jinja_template, transformers.__version__


def render(compiled, source, conv, tools, special):
    """render_jinja_template for one conversation; apply_chat_template's argument checks first."""
    messages = copy.deepcopy(conv["messages"])
    agp = conv.get("add_generation_prompt", False)
    cont = conv.get("continue_final_message", False)
    if cont and agp:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    final = None
    if cont:
        final = messages[-1].get("content")
        if final is None:
            raise ValueError('continue_final_message is set but the final message has no "content" to continue!')
        if "content" not in source:
            raise ValueError('continue_final_message is set to "content" but this is not an accepted field in the chat_template')
        messages[-1]["content"] = final + CONTINUE_TAG
    out = compiled.render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp, **special)
    if cont:
        if final.strip() not in out or CONTINUE_TAG.strip() not in out:
            raise ValueError("continue_final_message is set but the final message does not appear in the chat after applying the chat template")
        at = out.rindex(CONTINUE_TAG.strip())
        if out[at : at + len(CONTINUE_TAG)] == CONTINUE_TAG:
            out = out[:at]
        else:
            out = out[:at].rstrip()
    return out


def token_text(tok):
    # Old tokenizer_config.json files write special tokens as AddedToken objects.
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def load_templates(args, battery):
    """(id, source, special tokens) for every template found; id is how the Go test names it."""
    out = []
    for d in args.templates:
        for name in sorted(os.listdir(d)):
            if not name.endswith(".jinja"):
                continue
            with open(os.path.join(d, name), encoding="utf-8") as f:
                source = f.read()
            toks = battery["tokens"].get(name, {})
            out.append((name, source, {"bos": toks.get("bos"), "eos": toks.get("eos")}))
    for d in args.tokenizers or []:
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name, "tokenizer_config.json")
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            source = cfg.get("chat_template")
            if isinstance(source, list):  # named templates: the default one is what apply_chat_template takes
                source = {t["name"]: t["template"] for t in source}.get("default")
            out.append((name + "/tokenizer_config.json", source, {"bos": token_text(cfg.get("bos_token")), "eos": token_text(cfg.get("eos_token"))}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", help="the battery (testdata/chat/conversations.json)")
    ap.add_argument("--snippets", help="render the engine's snippets file instead of templates")
    ap.add_argument("--templates", action="append", default=[], help="a folder of *.jinja templates (repeatable)")
    ap.add_argument("--tokenizers", action="append", default=[], help="a folder of NAME/tokenizer_config.json (repeatable)")
    ap.add_argument("--replicate", action="store_true", help="use the replicated environment even when transformers is importable")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    if args.snippets:
        return render_snippets(args)
    if not args.conversations:
        ap.error("--conversations is required")

    with open(args.conversations, encoding="utf-8") as f:
        battery = json.load(f)
    now = datetime.fromisoformat(battery["now"])
    hf_compile, hf_version = (None, None) if args.replicate else transformers_compile()

    cases = []
    for tid, source, toks in load_templates(args, battery):
        if source is None:
            # apply_chat_template refuses a tokenizer without a template; ringlm falls back to ChatML.
            cases.append({"template": tid, "no_template": True})
            continue
        special = {k + "_token": v for k, v in toks.items() if v is not None}
        try:
            if hf_compile is not None:
                compiled = hf_compile(source)
                compiled.environment.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
            else:
                compiled = replicated_compile(source, now)
        except TemplateError as e:
            cases.append({"template": tid, "error": "syntax: " + str(e)})
            continue
        for conv in battery["conversations"]:
            tools = battery["tools"] if conv.get("tools") else None
            case = {"template": tid, "conversation": conv["name"]}
            try:
                case["output"] = render(compiled, source, conv, tools, special)
            except TemplateError as e:
                # raise_exception's message, or another template error (an undefined operand).
                case["error"] = type(e).__name__ + ": " + str(e)
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
                case["error"] = type(e).__name__ + ": " + str(e)
            cases.append(case)

    doc = {
        "generator": {
            "script": "tools/render_templates.py",
            "jinja2": jinja2.__version__,
            "transformers": hf_version,
            "python": sys.version.split()[0],
        },
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    ok = sum(1 for c in cases if "output" in c)
    print(f"{len(cases)} cases ({ok} rendered) with jinja2 {jinja2.__version__}, transformers {hf_version or 'replicated'} -> {args.out}")


def render_snippets(args):
    """Each snippet alone, with its vars and the battery's fixed clock."""
    with open(args.snippets, encoding="utf-8") as f:
        doc = json.load(f)
    now = datetime(2026, 11, 24, 15, 4, 5)
    out = []
    for sn in doc["snippets"]:
        case = {"name": sn["name"]}
        try:
            compiled = replicated_compile(sn["template"], now)
            case["output"] = compiled.render(**sn.get("vars", {}))
        except Exception as e:  # the exception's class is what the Go test compares
            case["error"] = type(e).__name__ + ": " + str(e)
        out.append(case)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generator": {"jinja2": jinja2.__version__, "python": sys.version.split()[0]}, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} snippets with jinja2 {jinja2.__version__} -> {args.out}")


if __name__ == "__main__":
    main()
