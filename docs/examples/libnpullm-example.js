imports.gi.versions.Npullm = '1.0';
const {GLib, Npullm} = imports.gi;

const loop = new GLib.MainLoop(null, false);
const client = Npullm.Client.new_sync(null, null);
client.generate_async('Write a haiku about a tiny neural processor.', null, null, (c, result) => {
    // no need to keep it: a request runs until it has emitted 'finished'
    const request = c.generate_finish(result);
    request.connect('token', (r, text) => log(`token: ${JSON.stringify(text)}`));
    request.connect('finished', (r, reason) => { print(`${r.text}\n[${reason}]`); loop.quit(); });
});
loop.run();
