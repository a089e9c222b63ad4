import gi
gi.require_version("Npullm", "1.0")
from gi.repository import GLib, Npullm

loop = GLib.MainLoop()
client = Npullm.Client.new_sync(None, None)


def started(client, result):
    # no need to keep it: a request runs until it has emitted "finished"
    request = client.generate_finish(result)
    request.connect("token", lambda r, text: print(text, end="", flush=True))
    request.connect("finished", lambda r, reason, stats: (print("\n[%s]" % reason), loop.quit()))


client.generate_async("Write a haiku about a tiny neural processor.", None, None, started)
loop.run()
