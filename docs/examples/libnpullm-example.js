imports.gi.versions.Npullm = '1.0';
const {GLib, Npullm} = imports.gi;

const loop = new GLib.MainLoop(null, false);
const client = Npullm.Client.new_sync(null, null);
let request; // keep it: a request that is dropped is cancelled
client.generate_async('Write a haiku about a tiny neural processor.', null, null, (c, result) => {
    request = c.generate_finish(result);
    request.connect('token', (r, text) => log(`token: ${JSON.stringify(text)}`));
    request.connect('finished', (r, reason) => { print(`${r.text}\n[${reason}]`); loop.quit(); });
});
loop.run();
