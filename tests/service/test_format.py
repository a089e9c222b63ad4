#!/usr/bin/python3
"""Constrained output through npullmd: the option format ("json" or a JSON
Schema) on Generate, Chat and Complete. A schema the compiler refuses is
InvalidArgument naming the schema path; a random-weight model's output
under a schema parses and has exactly the schema's shape (only the grammar
makes it so); the request finishes when the grammar is complete."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import GLib, run_tap, variant_dict  # noqa: E402

# Bounded: even a random model closes it within the tokens.
SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
        "tag": {"enum": ["a", "b"]},
    },
    "required": ["ok", "n", "tag"],
    "additionalProperties": False,
}


def opts(fmt, **more):
    o = {"temperature": ("d", 0.0), "max_tokens": ("u", 64), "format": ("s", fmt)}
    o.update(more)
    return variant_dict(o)


class FormatTest(tb.ServiceTestCase):
    def check_output(self, text):
        value = json.loads(text)
        self.assertEqual(set(value), {"ok", "n", "tag"}, text)
        self.assertIsInstance(value["ok"], bool)
        self.assertTrue(isinstance(value["n"], int) and 0 <= value["n"] <= 99, text)
        self.assertIn(value["tag"], ("a", "b"))

    def test_schema_output_on_every_method(self):
        c = self.client()
        S = lambda v: GLib.Variant("s", v)  # noqa: E731
        for method, prompt in (("Generate", "Give me JSON."),
                               ("Chat", [{"role": S("user"), "content": S("Give me JSON.")}])):
            path = c.generate(prompt, opts(json.dumps(SCHEMA)), method)
            self.assertTrue(c.wait(lambda: c.finished_of(path) is not None, 60))
            reason, stats = c.finished_of(path)
            self.assertEqual(reason, "stop", (method, stats))
            self.check_output("".join(c.tokens_of(path)))
        text, info = c.call("Complete", "(sa{sv})", ("Give me JSON.", opts(json.dumps(SCHEMA))), "(sa{sv})")
        self.check_output(text)
        # greedy under a grammar stays deterministic
        text2, _ = c.call("Complete", "(sa{sv})", ("Give me JSON.", opts(json.dumps(SCHEMA))), "(sa{sv})")
        self.assertEqual(text, text2)

    def test_json_any(self):
        c = self.client()
        text, info = c.call("Complete", "(sa{sv})", ("Give me JSON.", opts("json")), "(sa{sv})")
        if info["reason"] == "stop":
            json.loads(text)
        self.assertTrue(text.lstrip()[:1] in '{["-0123456789tfn', text)

    def test_bad_formats_are_invalid_argument(self):
        c = self.client()
        bad = [
            ({"type": "object", "properties": {"age": {"type": "intgr"}}}, "/properties/age/type"),
            ({"type": "array", "items": {"$ref": "#/$defs/missing"}}, "/items"),
        ]
        for schema, where in bad:
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi",
                                       opts(json.dumps(schema)))
            self.assertTrue(msg.split(": ", 1)[1].startswith("format"), msg)
            self.assertIn(where, msg)
        for text in ("not json", "x" * 70000):
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.generate, "hi", opts(text))
            self.assertTrue(msg.split(": ", 1)[1].startswith("format"), msg)
        self.assertEqual(c.prop("ActiveRequests"), 0)

    def test_large_schema_compiles_off_the_main_loop(self):
        """A schema near the size cap takes the compiler a few hundred
        milliseconds: calls that come after it are answered meanwhile, and
        its error (the last property is wrong) still names the path."""
        props = {}
        for i in range(200):
            props["field_%03d" % i] = {
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2,4}-[0-9]{3,6}(\\.[a-z]{1,8})?$"},
                               "when": {"type": "string", "format": "date-time"},
                               "n": {"type": "integer", "minimum": -1000, "maximum": 100000}},
                "required": ["code", "when", "n"]}
        props["zz_last"] = {"type": "intgr"}
        schema = json.dumps({"type": "object", "properties": props})
        self.assertLess(len(schema), 64 * 1024)
        c = self.client()
        order = []

        def note(what):
            def done(conn, res):
                try:
                    conn.call_finish(res)
                    order.append((what, None))
                except GLib.Error as e:
                    order.append((what, e.message))
            return done
        c.conn.call(tb.BUS_NAME, tb.MANAGER_PATH, tb.MANAGER_IFACE, "Generate",
                    GLib.Variant("(sa{sv})", ("hi", opts(schema))), None, tb.Gio.DBusCallFlags.NONE, 60000,
                    None, note("generate"))
        for i in range(3):
            c.conn.call(tb.BUS_NAME, tb.MANAGER_PATH, "org.freedesktop.DBus.Properties", "Get",
                        GLib.Variant("(ss)", (tb.MANAGER_IFACE, "ActiveRequests")), None,
                        tb.Gio.DBusCallFlags.NONE, 60000, None, note("get%d" % i))
        self.assertTrue(c.wait(lambda: len(order) == 4, 60))
        # replies come in the order the daemon sends them
        self.assertEqual([w for w, _ in order], ["get0", "get1", "get2", "generate"], order)
        self.assertIn("InvalidArgument", order[3][1])
        self.assertIn("format: schema: /properties/zz_last/type", order[3][1])

    def test_client_format_flag(self):
        schema_file = os.path.join(self.workdir, "schema.json")
        with open(schema_file, "w") as f:
            json.dump(SCHEMA, f)
        base = ("--temperature", "0", "-n", "64")
        out = self.run_client("generate", *base, "--format", schema_file, "Give me JSON.")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.check_output(out.stdout.decode())
        out = self.run_client("generate", *base, "--format", os.path.join(self.workdir, "missing.json"), "x")
        self.assertEqual(out.returncode, 2, out.stderr)
        with open(schema_file, "w") as f:
            json.dump({"type": "object", "properties": {"age": {"type": "intgr"}}}, f)
        out = self.run_client("generate", *base, "--format", schema_file, "x")
        self.assertEqual(out.returncode, 2, out.stderr)  # InvalidArgument, as for every option
        self.assertIn(b"/properties/age/type", out.stderr)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
