// libnpullm-1 through its typelib, as a GJS program (a GNOME Shell
// extension, say) uses it: stream a generation, one whose reference is
// dropped at once, cancel one, list models.
// Runs against the bus in DBUS_SYSTEM_BUS_ADDRESS.
imports.gi.versions.Npullm = '1.0';
const {GLib, Gio, Npullm} = imports.gi;
const System = imports.system;

const loop = new GLib.MainLoop(null, false);
let status = 0;
function fail(msg) {
    print(`FAIL: ${msg}`);
    status = 1;
    loop.quit();
}
GLib.timeout_add_seconds(GLib.PRIORITY_DEFAULT, 120, () => fail('timed out'));

const client = Npullm.Client.new_sync(null, null);

function stream() {
    const opts = new Npullm.Options({temperature: 0.0, 'max-tokens': 8});
    client.generate_async('Hello there', opts, null, (c, res) => {
        const req = c.generate_finish(res);
        let text = '';
        req.connect('token', (r, t) => { text += t; });
        req.connect('finished', (r, reason, stats) => {
            if (reason !== 'length' || text !== req.text)
                return fail(`stream: ${reason} ${JSON.stringify(text)}`);
            print(`ok stream: ${JSON.stringify(text)}`);
            dropped();
        });
    });
}

// a request nobody keeps (not even the callback's closure after it
// returns), collected by force: it runs to its end all the same
function dropped() {
    let text = '';
    let collecting = 0;
    const opts = new Npullm.Options({temperature: 0.0, 'max-tokens': 100});
    client.generate_async('Tell a long story', opts, null, (c, res) => {
        const req = c.generate_finish(res);
        req.connect('token', (r, t) => {
            // once it was delivered, collect again and again while it runs
            // (GJS lets go of a wrapper only some time after the last
            // other reference went)
            if (text === '') {
                collecting = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 5, () => {
                    System.gc();
                    return GLib.SOURCE_CONTINUE;
                });
            }
            text += t;
        });
        req.connect('finished', (r, reason, stats) => {
            GLib.source_remove(collecting);
            if (reason !== 'length' || stats.deepUnpack()['generated_tokens'].deepUnpack() !== 100 || text !== r.text)
                return fail(`dropped: ${reason} ${JSON.stringify(text)}`);
            print('ok dropped');
            cancel();
        });
    });
}

function cancel() {
    const cancellable = new Gio.Cancellable();
    client.generate_async('Tell a long story', new Npullm.Options({'max-tokens': 200}), cancellable, (c, res) => {
        const req = c.generate_finish(res);
        req.connect('token', () => cancellable.cancel());
        req.connect('finished', (r, reason) => {
            if (reason !== 'cancelled')
                return fail(`cancel: ${reason}`);
            print('ok cancel');
            listModels();
        });
    });
}

function listModels() {
    client.list_models_async(null, (c, res) => {
        const models = c.list_models_finish(res).deepUnpack();
        const names = models.map(m => m.name.deepUnpack());
        if (!names.includes('tiny'))
            return fail(`models: ${names}`);
        print(`ok list models: ${names}`);
        loop.quit();
    });
}

stream();
loop.run();
System.exit(status);
