#!/usr/bin/python3
"""Thinking: the option think (enable_thinking in the chat template) and
the unicast Thinking signal, on a generated Qwen 3 model whose template
opens the <think> block in the generation prompt (so that every generated
token of a random-weight model is thinking until the option closes it)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, ServiceTestCase, run_tap, variant_dict  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 8)}


def thinking_of(c, path):
    return "".join(p[0] for (sp, i, m, p) in c.signals if sp == path and m == "Thinking")


class ThinkingTest(ServiceTestCase):
    ARGS = ("--default-model", "qwen")

    make_model_dir = staticmethod(tb.qwen_model_dir)

    def run_with(self, c, think, method="Generate"):
        opts = dict(GREEDY)
        if think is not None:
            opts["think"] = ("b", think)
        prompt = "What is 2 + 2?"
        if method == "Chat":
            S = lambda v: GLib.Variant("s", v)  # noqa: E731
            prompt = [{"role": S("user"), "content": S(prompt)}]
        path = c.generate(prompt, variant_dict(opts), method)
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 60))
        reason, stats = c.finished_of(path)
        self.assertEqual(reason, "length", stats)
        self.assertEqual(stats["generated_tokens"], 8)
        return "".join(c.tokens_of(path)), thinking_of(c, path)

    def test_thinking_apart_from_the_answer(self):
        c = self.client()
        for method in ("Generate", "Chat"):
            for think in (None, True):  # the template's default thinks
                text, thinking = self.run_with(c, think, method)
                self.assertEqual(text, "", (method, think))
                self.assertNotEqual(thinking, "", (method, think))
            text, thinking = self.run_with(c, False, method)
            self.assertNotEqual(text, "", method)
            self.assertEqual(thinking, "", method)
        # the same tokens either way: thinking on is the default's text
        self.assertEqual(self.run_with(c, True)[1], self.run_with(c, None)[1])

    def test_complete_returns_thinking(self):
        c = self.client()
        opts = variant_dict(dict(GREEDY, think=("b", True)))
        text, info = c.call("Complete", "(sa{sv})", ("What is 2 + 2?", opts), "(sa{sv})")
        self.assertEqual(text, "")
        self.assertEqual(info["thinking"], self.run_with(c, True)[1])
        text, info = c.call("Complete", "(sa{sv})", ("What is 2 + 2?", variant_dict(dict(GREEDY, think=("b", False)))),
                            "(sa{sv})")
        self.assertNotEqual(text, "")
        self.assertNotIn("thinking", info)

    def test_client_think_flags(self):
        c = self.client()
        base = ("--temperature", "0", "-n", "8")
        thought = self.run_with(c, True)[1]
        # text: the thinking on stderr, the answer alone on stdout
        for flags, think in ((["--think"], True), ([], None), (["--no-think"], False)):
            out = self.run_client("generate", *base, *flags, "What is 2 + 2?")
            self.assertEqual(out.returncode, 0, out.stderr)
            text, thinking = self.run_with(c, think)
            self.assertEqual(out.stdout.decode().strip(), text.strip(), flags)
            self.assertEqual(thinking == "", think is False, flags)
            self.assertIn(thinking, out.stderr.decode(), flags)
        # --json: thinking events, then no token events while thinking
        out = self.run_client("--json", "generate", *base, "--think", "What is 2 + 2?")
        events = [json.loads(ln) for ln in out.stdout.decode().splitlines()]
        self.assertEqual("".join(e["text"] for e in events if e["event"] == "thinking"), thought)
        self.assertFalse([e for e in events if e["event"] == "token"])
        out = self.run_client("--json", "chat", *base, "--no-think", input=b"What is 2 + 2?\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(ln) for ln in out.stdout.decode().splitlines()]
        self.assertFalse([e for e in events if e["event"] == "thinking"])
        self.assertTrue([e for e in events if e["event"] == "token"])
        # both, or with --raw: usage errors, named
        out = self.run_client("generate", "--think", "--no-think", "hi")
        self.assertEqual(out.returncode, 2)
        self.assertIn("--think and --no-think exclude each other", out.stderr.decode())
        out = self.run_client("generate", "--raw", "--think", "hi")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("think: cannot be combined with raw", out.stderr.decode())

    def test_client_reasoning_effort(self):
        """--reasoning-effort reaches the template, which names the level
        once, twice or three times (think-template.jinja): the prompt grows
        level by level, in generate and in chat."""

        def prompt_tokens(command, *flags):
            args = ["--json", command, "--temperature", "0", "-n", "1", *flags]
            out = self.run_client(*args, "What is 2 + 2?") if command == "generate" else \
                self.run_client(*args, input=b"What is 2 + 2?\n")
            self.assertEqual(out.returncode, 0, out.stderr)
            events = [json.loads(ln) for ln in out.stdout.decode().splitlines()]
            return [e["stats"]["prompt_tokens"] for e in events if e["event"] == "finished"][0]

        for command in ("generate", "chat"):
            counts = [prompt_tokens(command)]
            counts += [prompt_tokens(command, "--reasoning-effort", lv) for lv in ("low", "medium", "high")]
            self.assertEqual(counts, sorted(set(counts)), command)
        out = self.run_client("generate", "--reasoning-effort", "extreme", "hi")
        self.assertEqual(out.returncode, 2)
        self.assertIn("--reasoning-effort 'extreme': expected low or medium or high", out.stderr.decode())
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.client().generate, "hi",
                                   variant_dict({"reasoning_effort": ("s", "extreme")}))
        self.assertIn("reasoning_effort: expected low or medium or high", msg)

    def test_bad_uses(self):
        c = self.client()
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi",
                                   variant_dict({"raw": ("b", True), "think": ("b", True)}))
        self.assertIn("think: cannot be combined with raw", msg)
        msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi",
                                   variant_dict({"think": ("s", "yes")}))
        self.assertIn("think: expected type 'b'", msg)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
