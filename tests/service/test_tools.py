#!/usr/bin/python3
"""Tool calls through npullmd: the Chat options tools and tool_choice,
assistant messages with tool_calls and tool messages, the ToolCall signal
and Finished reason tool_calls, on a random-weight Qwen 3 model with Qwen
3's real chat template (<tool_call> blocks). With random weights only the
grammar of tool_choice required / a named function makes a call, whose
arguments must then validate against the function's parameters."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, ServiceTestCase, run_tap, variant_dict  # noqa: E402

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 8},
            "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two numbers",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 99},
            "b": {"type": "integer", "minimum": 0, "maximum": 99}},
            "required": ["a", "b"], "additionalProperties": False}}},
]
S = lambda v: GLib.Variant("s", v)  # noqa: E731


def msg(role, content, **extra):
    m = {"role": S(role), "content": S(content)}
    m.update({k: S(v) for k, v in extra.items()})
    return m


def opts(**more):
    o = {"temperature": ("d", 0.0), "max_tokens": ("u", 96), "tools": ("s", json.dumps(TOOLS))}
    o.update(more)
    return variant_dict(o)


def check_arguments(test, name, args):
    """The function's parameters, checked by hand (a small schema)."""
    if name == "get_weather":
        test.assertEqual(set(args), {"city", "unit"})
        test.assertTrue(isinstance(args["city"], str) and 1 <= len(args["city"]) <= 8, args)
        test.assertIn(args["unit"], ("c", "f"))
    else:
        test.assertEqual(name, "add")
        test.assertEqual(set(args), {"a", "b"})
        for k in ("a", "b"):
            test.assertTrue(isinstance(args[k], int) and 0 <= args[k] <= 99, args)


class ToolsTest(ServiceTestCase):
    ARGS = ("--default-model", "qwen")

    make_model_dir = staticmethod(tb.qwen_model_dir)

    def chat(self, c, messages, options):
        path = c.generate(messages, options, "Chat")
        self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 60))
        reason, stats = c.finished_of(path)
        calls = [p for (sp, i, m, p) in c.signals if sp == path and m == "ToolCall"]
        return reason, stats, calls, "".join(c.tokens_of(path))

    def test_required_and_named_calls(self):
        """Qwen's family writes several calls in a turn: one or more (at
        most 8) by default, exactly one with parallel_tool_calls false."""
        c = self.client()
        for choice in ("required", "add", "get_weather"):
            for parallel in (True, False):
                reason, stats, calls, text = self.chat(
                    c, [msg("user", "Weather in Oslo?")],
                    opts(tool_choice=("s", choice), parallel_tool_calls=("b", parallel), max_tokens=("u", 400)))
                self.assertEqual(reason, "tool_calls", stats)
                self.assertTrue(1 <= len(calls) <= 8 if parallel else len(calls) == 1, calls)
                for call_id, name, arguments in calls:
                    self.assertTrue(call_id)
                    if choice != "required":
                        self.assertEqual(name, choice)
                    check_arguments(self, name, json.loads(arguments))
                self.assertEqual(text.strip(), "", "the calls are not in the text")

    def test_round_trip_reuses_the_prefix(self):
        c = self.client()
        first = [msg("user", "What is 2 + 3?")]
        reason, stats, calls, _ = self.chat(c, first, opts(tool_choice=("s", "add")))
        self.assertEqual(reason, "tool_calls")
        call_id, name, arguments = calls[0]
        tool_calls = json.dumps([{"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": json.loads(arguments)}}])
        turn = first + [msg("assistant", "", tool_calls=tool_calls),
                        msg("tool", "5", tool_call_id=call_id, name=name)]
        reason, stats2, calls2, text = self.chat(c, turn, opts(max_tokens=("u", 4)))
        self.assertIn(reason, ("stop", "length", "tool_calls"), stats2)
        # the conversation so far was computed by the first request
        self.assertGreater(stats2["cached_tokens"], 0, stats2)
        self.assertGreater(stats2["prompt_tokens"], stats["prompt_tokens"])

    def test_none_does_not_offer_tools(self):
        c = self.client()
        plain = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 2)})
        _, base, _, _ = self.chat(c, [msg("user", "Hi")], plain)
        _, none, calls, _ = self.chat(c, [msg("user", "Hi")], opts(tool_choice=("s", "none"), max_tokens=("u", 2)))
        self.assertEqual(none["prompt_tokens"], base["prompt_tokens"])
        self.assertEqual(calls, [])
        _, auto, _, _ = self.chat(c, [msg("user", "Hi")], opts(max_tokens=("u", 2)))
        self.assertGreater(auto["prompt_tokens"], base["prompt_tokens"], "the template lists the tools")

    def test_client_tools_flags(self):
        tools_file = os.path.join(self.workdir, "tools.json")
        with open(tools_file, "w") as f:
            json.dump(TOOLS, f)
        out = self.run_client("--json", "chat", "--temperature", "0", "-n", "96", "--tools", tools_file,
                              "--tool-choice", "add", input=b"What is 2 + 3?\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(line) for line in out.stdout.decode().splitlines() if line.startswith("{")]
        calls = [e for e in events if e.get("event") == "tool_call"]
        self.assertTrue(calls, events)
        for call in calls:
            self.assertEqual(call["name"], "add")
            check_arguments(self, "add", json.loads(call["arguments"]))
        out = self.run_client("chat", "--tools", os.path.join(self.workdir, "missing.json"), input=b"x\n")
        self.assertEqual(out.returncode, 2, out.stderr)
        # --no-parallel-tool-calls sends parallel_tool_calls false: exactly one call
        out = self.run_client("--json", "chat", "--temperature", "0", "-n", "400", "--tools", tools_file,
                              "--tool-choice", "required", "--no-parallel-tool-calls", input=b"Weather in Oslo?\n")
        self.assertEqual(out.returncode, 0, out.stderr)
        events = [json.loads(line) for line in out.stdout.decode().splitlines() if line.startswith("{")]
        self.assertEqual(len([e for e in events if e.get("event") == "tool_call"]), 1, events)
        out = self.run_client("chat", "--parallel-tool-calls", "--no-parallel-tool-calls", input=b"x\n")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn(b"exclude each other", out.stderr)

    def test_invalid_tools(self):
        c = self.client()
        bad_params = [dict(TOOLS[0], function=dict(TOOLS[0]["function"],
                                                   parameters={"type": "object",
                                                               "properties": {"x": {"type": "intgr"}}}))]
        cases = [
            ({"tools": ("s", "not json")}, "tools"),
            ({"tools": ("s", "{}")}, "tools"),
            ({"tools": ("s", json.dumps([{"type": "function", "function": {"name": "a b"}}]))}, "tools[0].function.name"),
            ({"tools": ("s", json.dumps(TOOLS + TOOLS[:1]))}, "tools[2].function.name"),
            ({"tools": ("s", json.dumps(bad_params))}, "tools[0].function.parameters: schema: /properties/x/type"),
            ({"tools": ("s", "[" + " " * (300 * 1024) + "]")}, "tools"),
            ({"tool_choice": ("s", "required")}, "tool_choice"),
            ({"tools": ("s", json.dumps(TOOLS)), "tool_choice": ("s", "nope")}, "tool_choice"),
            ({"tools": ("s", json.dumps(TOOLS)), "tool_choice": ("s", "add"), "format": ("s", "json")}, "format"),
        ]
        for o, prefix in cases:
            m = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, [msg("user", "x")],
                                     variant_dict(o), method="Chat")
            self.assertTrue(m.split(": ", 1)[1].startswith(prefix), (o, m))
        bad_messages = [
            ([msg("user", "x", tool_calls="[]")], "messages[0].tool_calls"),
            ([msg("assistant", "x", tool_calls="{not json")], "messages[0].tool_calls"),
            ([msg("user", "x", tool_call_id="1")], "messages[0].tool_call_id"),
        ]
        for messages, prefix in bad_messages:
            m = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, messages, variant_dict({}),
                                     method="Chat")
            self.assertTrue(m.split(": ", 1)[1].startswith(prefix), m)
        m = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "x",
                                 variant_dict({"tools": ("s", json.dumps(TOOLS))}))
        self.assertIn("not accepted by Generate", m)
        self.assertEqual(c.prop("ActiveRequests"), 0)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
