#!/usr/bin/python3
"""libnpullm-1 through its typelib, as a PyGObject program uses it: stream
a generation, one whose reference is dropped at once, cancel one, list models. Runs against the bus in
DBUS_SYSTEM_BUS_ADDRESS; prints TAP-free 'ok' lines and exits non-zero on
failure."""

import sys

import gi

gi.require_version("Npullm", "1.0")
from gi.repository import GLib, Npullm  # noqa: E402

loop = GLib.MainLoop()
state = {}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


GLib.timeout_add_seconds(120, lambda: fail("timed out"))
client = Npullm.Client.new_sync(None, None)
if client.props.default_model != "tiny":
    fail("default-model is %r" % client.props.default_model)

# stream
opts = Npullm.Options(temperature=0.0, max_tokens=8)
tokens = []


def streamed(req, reason, stats):
    state["reason"] = reason
    state["stats"] = stats
    loop.quit()


def generated(c, res):
    req = c.generate_finish(res)
    state["req"] = req
    req.connect("token", lambda r, t: tokens.append(t))
    req.connect("finished", streamed)


client.generate_async("Hello there", opts, None, generated)
loop.run()
if state["reason"] != "length" or state["stats"]["generated_tokens"] != 8:
    fail("stream: %r %r" % (state["reason"], state["stats"]))
if "".join(tokens) != state["req"].props.text:
    fail("tokens do not add up to the text")
print("ok stream:", repr(state["req"].props.text))

# a request nobody keeps a reference to (Python drops it when the callback
# returns) runs to its end, its signals all delivered
dropped = []


def dropped_finished(req, reason, stats):
    state["dropped"] = (reason, stats["generated_tokens"], req.props.text)
    loop.quit()


def dropped_generated(c, res):
    req = c.generate_finish(res)
    req.connect("token", lambda r, t: dropped.append(t))
    req.connect("finished", dropped_finished)


client.generate_async("Hello there", Npullm.Options(temperature=0.0, max_tokens=8), None, dropped_generated)
loop.run()
if state["dropped"][:2] != ("length", 8) or "".join(dropped) != state["dropped"][2]:
    fail("dropped: %r, tokens %r" % (state["dropped"], dropped))
print("ok dropped")

# cancel through a Gio.Cancellable once the first token is in
from gi.repository import Gio  # noqa: E402
cancellable = Gio.Cancellable()


def cancel_on_token(req, text):
    cancellable.cancel()


def long_generated(c, res):
    req = c.generate_finish(res)
    state["long"] = req
    req.connect("token", cancel_on_token)
    req.connect("finished", streamed)


client.generate_async("Tell a long story", Npullm.Options(max_tokens=200), cancellable, long_generated)
loop.run()
if state["reason"] != "cancelled":
    fail("cancel: finished with %r" % state["reason"])
try:
    state["long"].propagate_error()
    fail("a cancelled request propagates no error")
except GLib.Error as e:
    if not e.matches(Npullm.Error.quark(), Npullm.Error.CANCELLED):
        fail("cancel error: %s" % e)
print("ok cancel")


# list models
def listed(c, res):
    state["models"] = c.list_models_finish(res).unpack()
    loop.quit()


client.list_models_async(None, listed)
loop.run()
names = [m["name"] for m in state["models"]]
if "tiny" not in names:
    fail("models: %r" % names)
print("ok list models:", names)

# an error from the service arrives in the Npullm.Error domain
try:
    def bad(c, res):
        try:
            c.generate_finish(res)
        except GLib.Error as e:
            state["error"] = e
        loop.quit()
    client.generate_async("hi", Npullm.Options(model="nonexistent"), None, bad)
    loop.run()
    e = state["error"]
    if not e.matches(Npullm.Error.quark(), Npullm.Error.NO_SUCH_MODEL):
        fail("error domain: %s %s" % (e.domain, e.code))
finally:
    pass
print("ok error")

# embeddings: an aad of unit vectors and the info (a{sv}) as an out value
if "minilm" in names:
    def embedded(c, res):
        state["embed"] = c.embed_finish(res)
        loop.quit()
    client.embed_async(["one", "two", "three"], Npullm.Options(model="minilm", dimensions=16), None, embedded)
    loop.run()
    vectors, info = state["embed"]
    vectors = vectors.unpack()
    if len(vectors) != 3 or len(vectors[0]) != 16 or abs(sum(x * x for x in vectors[2]) - 1) > 1e-5:
        fail("embed: %r" % vectors)
    if info.unpack()["model"] != "minilm":
        fail("embed info: %r" % info.unpack())
    print("ok embed")

    # reranking: an a(ud) best first, cut to top-n
    def reranked(c, res):
        state["rerank"] = c.rerank_finish(res)
        loop.quit()
    docs = ["a fox", "", "the quick brown fox", "a dog"]
    client.rerank_async("fox", docs, Npullm.Options(model="ranker", top_n=3), None, reranked)
    loop.run()
    results, info = state["rerank"]
    results = results.unpack()
    scores = [s for _, s in results]
    if len(results) != 3 or scores != sorted(scores, reverse=True) or len({i for i, _ in results}) != 3:
        fail("rerank: %r" % results)
    if info.unpack()["documents"] != 4:
        fail("rerank info: %r" % info.unpack())
    print("ok rerank")
