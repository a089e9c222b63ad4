// libnpullm-1 through its typelib, as a GJS program (a GNOME Shell
// extension, say) uses it: stream a generation, one whose reference is
// dropped at once, cancel one, list models; with an embedding model and a
// reranker (tests/embed's), embed and rerank.
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
        if (names.includes('minilm') && names.includes('ranker'))
            embed();
        else
            loop.quit();
    });
}

// an aad of unit vectors, and the info as an out value (a GVariant)
function embed() {
    const opts = new Npullm.Options({model: 'minilm', dimensions: 16});
    client.embed_async(['one', 'two', 'three'], opts, null, (c, res) => {
        const [vectors, info] = c.embed_finish(res);
        const v = vectors.deepUnpack();
        const norm = v[2].reduce((s, x) => s + x * x, 0);
        if (v.length !== 3 || v[0].length !== 16 || Math.abs(norm - 1) > 1e-5)
            return fail(`embed: ${JSON.stringify(v)}`);
        if (info.deepUnpack()['model'].deepUnpack() !== 'minilm')
            return fail(`embed info: ${info.print(true)}`);
        print('ok embed');
        rerank();
    });
}

// an a(ud) of (index, score), best first, cut to top-n
function rerank() {
    const opts = new Npullm.Options({model: 'ranker', 'top-n': 3});
    client.rerank_async('fox', ['a fox', '', 'the quick brown fox', 'a dog'], opts, null, (c, res) => {
        const [results, info] = c.rerank_finish(res);
        const r = results.deepUnpack();
        const sorted = r.every(([, s], i) => i === 0 || s <= r[i - 1][1]);
        if (r.length !== 3 || !sorted || new Set(r.map(([i]) => i)).size !== 3)
            return fail(`rerank: ${JSON.stringify(r)}`);
        if (info.deepUnpack()['documents'].deepUnpack() !== 4)
            return fail(`rerank info: ${info.print(true)}`);
        print('ok rerank');
        loop.quit();
    });
}

stream();
loop.run();
System.exit(status);
