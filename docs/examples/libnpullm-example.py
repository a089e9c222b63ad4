import gi
gi.require_version("Npullm", "1.0")
from gi.repository import GLib, Npullm

loop = GLib.MainLoop()
client = Npullm.Client.new_sync(None, None)
requests = []  # keep them: a request that is dropped is cancelled


def started(client, result):
    request = client.generate_finish(result)
    request.connect("token", lambda r, text: print(text, end="", flush=True))
    request.connect("finished", lambda r, reason, stats: (print("\n[%s]" % reason), loop.quit()))
    requests.append(request)


client.generate_async("Write a haiku about a tiny neural processor.", None, None, started)
loop.run()
