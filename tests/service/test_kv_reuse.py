#!/usr/bin/python3
"""KV reuse across requests through npullmd (issue #16): the next turn of
a conversation reuses the prompt positions the previous one computed
(Finished stats `cached_tokens`) with exactly the text a request without
reuse gives; reuse never crosses users (user B's identical prompt reports
cached_tokens 0); ForgetCache drops the caller's caches only; unloading a
model frees its caches; the KvCacheMiB budget evicts the least recently
used conversation.

User B is `nobody`, run in a child process (needs root; those tests are
skipped otherwise)."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npullm_testbus as tb  # noqa: E402
from gi.repository import GLib  # noqa: E402
from npullm_testbus import run_tap, variant_dict  # noqa: E402

GREEDY = {"temperature": ("d", 0.0), "max_tokens": ("u", 6)}
OTHER_UID = 65534

# User B: Generate PROMPT greedily (or ForgetCache when PROMPT is empty),
# prints {"cached_tokens": u, "text": s} or {"forgot": true}.
CHILD = r'''
import json, sys, time
import gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
address, prompt = sys.argv[1], sys.argv[2]
conn = Gio.DBusConnection.new_for_address_sync(address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
    Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
if not prompt:
    conn.call_sync("org.npullm", "/org/npullm", "org.npullm.Manager", "ForgetCache", None, None,
                   Gio.DBusCallFlags.NONE, 60000, None)
    print(json.dumps({"forgot": True}))
    sys.exit(0)
done, text = {}, []
def on_signal(c, sender, path, iface, member, params):
    if member == "Finished":
        done[path] = params.unpack()[1]
    elif member == "Token":
        text.append(params.unpack()[0])
conn.signal_subscribe(None, "org.npullm.Request", None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
opts = {"temperature": GLib.Variant("d", 0.0), "max_tokens": GLib.Variant("u", 6)}
path = conn.call_sync("org.npullm", "/org/npullm", "org.npullm.Manager", "Generate",
    GLib.Variant("(sa{sv})", (prompt, opts)), None, Gio.DBusCallFlags.NONE, 60000, None).unpack()[0]
deadline = time.monotonic() + 120
ctx = GLib.MainContext.default()
while path not in done and time.monotonic() < deadline:
    ctx.iteration(True)
print(json.dumps({"cached_tokens": done[path]["cached_tokens"], "text": "".join(text)}))
'''

PROMPT = "Tell me about the sea, the wind and the long grey waves on the shore."


def msg(role, content):
    return {"role": GLib.Variant("s", role), "content": GLib.Variant("s", content)}


class KvReuseTest(tb.ServiceTestCase):
    CONFIG = {"Limits": {"KvCacheMiB": "64"}}

    def forget(self, c):
        self.assertEqual(c.call("ForgetCache"), ())

    def test_next_turn_reuses_and_is_identical(self):
        c = self.client()
        self.forget(c)
        turn1 = [msg("system", "Be brief."), msg("user", PROMPT)]
        text1, _, stats1 = c.run(turn1, variant_dict(GREEDY), method="Chat")
        self.assertEqual(stats1["cached_tokens"], 0)
        turn2 = turn1 + [msg("assistant", text1), msg("user", "And the birds above them?")]
        text2, _, stats2 = c.run(turn2, variant_dict(GREEDY), method="Chat")
        # at least the whole first prompt came from the cache
        self.assertGreaterEqual(stats2["cached_tokens"], stats1["prompt_tokens"])
        self.assertLess(stats2["cached_tokens"], stats2["prompt_tokens"])
        # the same turn from scratch: the same text
        self.forget(c)
        text2b, _, stats2b = c.run(turn2, variant_dict(GREEDY), method="Chat")
        self.assertEqual(stats2b["cached_tokens"], 0)
        self.assertEqual(text2b, text2)
        # the same request again: every position but the last
        text2c, _, stats2c = c.run(turn2, variant_dict(GREEDY), method="Chat")
        self.assertEqual(stats2c["cached_tokens"], stats2c["prompt_tokens"] - 1)
        self.assertEqual(text2c, text2)

    def test_client_forget_cache(self):
        c = self.client()
        c.run(PROMPT, variant_dict(GREEDY))
        r = self.run_client("forget-cache")
        self.assertEqual(r.returncode, 0, r.stderr)
        _, _, stats = c.run(PROMPT, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], 0)
        self.assertEqual(self.run_client("forget-cache", "extra").returncode, 2)

    def test_unload_frees_caches(self):
        c = self.client()
        c.run(PROMPT, variant_dict(GREEDY))
        _, _, stats = c.run(PROMPT, variant_dict(GREEDY))
        self.assertGreater(stats["cached_tokens"], 0)
        c.call("UnloadModel", "(s)", ("tiny",))
        _, _, stats = c.run(PROMPT, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], 0)

    def other_user(self, prompt):
        r = subprocess.run([sys.executable, "-c", CHILD, self.bus.address, prompt], user=OTHER_UID,
                           group=OTHER_UID, capture_output=True, timeout=180, cwd="/")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return json.loads(r.stdout)

    def test_users_apart(self):
        if os.getuid() != 0:
            self.skipTest("needs root to run user B as another uid")
        os.chmod(self.workdir, 0o755)  # user B must reach the bus socket
        a = self.client()
        self.forget(a)
        text, _, stats = a.run(PROMPT, variant_dict(GREEDY))
        text, _, stats = a.run(PROMPT, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], stats["prompt_tokens"] - 1)
        b = self.other_user(PROMPT)
        self.assertEqual(b["cached_tokens"], 0)  # A's cache is not B's
        self.assertEqual(b["text"], text)
        self.assertGreater(self.other_user(PROMPT)["cached_tokens"], 0)  # B's own
        # A forgets: A's caches go, B's stay; B forgets its own
        self.forget(a)
        _, _, stats = a.run(PROMPT + " Now.", variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], 0)
        self.assertGreater(self.other_user(PROMPT)["cached_tokens"], 0)
        self.assertTrue(self.other_user("")["forgot"])
        self.assertEqual(self.other_user(PROMPT)["cached_tokens"], 0)
        _, _, stats = a.run(PROMPT + " Now.", variant_dict(GREEDY))
        self.assertGreater(stats["cached_tokens"], 0)


class KvBudgetTest(tb.ServiceTestCase):
    # A cached request of the tiny model holds 260 bytes per position
    # (K and V of 2 layers x 2 heads x 16 dims in halves, its token): one
    # long prompt of ~1900 positions fits in 1 MiB, three do not.
    CONFIG = {"Limits": {"KvCacheMiB": "1"}}

    def test_eviction_under_budget(self):
        c = self.client()
        x, y, z = ("%s %s" % (color, " ".join([PROMPT] * 110)) for color in ("Red", "Blue", "Green"))
        c.run(x, variant_dict(GREEDY))
        _, _, stats = c.run(x, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], stats["prompt_tokens"] - 1)
        self.assertTrue(1700 < stats["prompt_tokens"] < 2000, stats["prompt_tokens"])
        # y and z share only the chat template's header with x, and push
        # x (the least recently used) out
        _, _, stats = c.run(y, variant_dict(GREEDY))
        header = stats["cached_tokens"]
        self.assertLess(header, stats["prompt_tokens"] // 2)
        c.run(z, variant_dict(GREEDY))
        _, _, stats = c.run(z, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], stats["prompt_tokens"] - 1)
        _, _, stats = c.run(x, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], header)


class KvOffTest(tb.ServiceTestCase):
    CONFIG = {"Limits": {"KvCacheMiB": "0"}}

    def test_no_reuse(self):
        c = self.client()
        c.run(PROMPT, variant_dict(GREEDY))
        _, _, stats = c.run(PROMPT, variant_dict(GREEDY))
        self.assertEqual(stats["cached_tokens"], 0)


if __name__ == "__main__":
    sys.exit(run_tap(__name__))
