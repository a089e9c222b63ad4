// Unit tests of the GNOME Shell extension's shell-free logic (logic.js)
// under plain gjs: indicator text, model filtering, error text, progress
// text, the per-frame token coalescer, the conversation window, the
// applications in use (their words, and when ListApplications is asked).
// argv[0]: the extension folder. TAP output.
const System = imports.system;
imports.searchPath.unshift(ARGV[0]);
const Logic = imports.logic;

let n = 0;
let failed = 0;
function check(name, got, want) {
    n++;
    const ok = JSON.stringify(got) === JSON.stringify(want);
    if (!ok)
        failed++;
    print(`${ok ? 'ok' : 'not ok'} ${n} ${name}${ok ? '' : ` # got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`}`);
}

check('device cpu', Logic.deviceLabel('cpu'), 'CPU');
check('device npu', Logic.deviceLabel('npu:xdna2'), 'NPU');
check('device emulated', Logic.deviceLabel('npu-emu'), 'NPU (emulated)');
check('device unknown yet', Logic.deviceLabel(''), '…');
check('indicator loaded', Logic.indicatorText('npu:xdna1', ['tiny']), 'NPU ●');
check('indicator idle', Logic.indicatorText('cpu', []), 'CPU ○');

check('usable models: unsupported dropped, sorted',
    Logic.usableModels([
        {name: 'zeta', supported: true, vision: false, loaded: true},
        {name: 'broken', supported: false, reason: 'not GGUF'},
        {name: 'alpha', supported: true, vision: true},
    ]),
    [{name: 'alpha', vision: true, loaded: false}, {name: 'zeta', vision: false, loaded: true}]);
check('usable models: none', Logic.usableModels([{name: 'x', supported: false}]), []);

check('error NotAuthorized', Logic.errorText('org.npullm.Error.NotAuthorized', 'x'),
    'You are not allowed to use the assistant (polkit said no).');
check('error Busy', Logic.errorText('org.npullm.Error.Busy', 'queue full'),
    'The assistant is busy: its queue is full. Try again in a moment.');
check('error load failed names the reason', Logic.errorText('org.npullm.Error.ModelLoadFailed', 'bad file'),
    'The model could not be loaded: bad file');
check('error service missing', Logic.errorText('org.freedesktop.DBus.Error.ServiceUnknown',
    'The name org.npullm was not provided by any .service files'),
'The npullm service is not running or not installed.');
check('error other', Logic.errorText(null, 'boom'), 'Something went wrong: boom');

check('progress queued with position', Logic.progressText('queued', 3), 'Waiting: 3 requests ahead');
check('progress queued first', Logic.progressText('queued', 0), 'Waiting for the model…');
check('progress loading', Logic.progressText('loading', 0), 'Loading the model…');
check('finish length quiet', Logic.finishText('length'), '');
check('finish cancelled', Logic.finishText('cancelled'), 'Stopped.');
check('finish error', Logic.finishText('error'), 'The answer ended early (error).');

// coalescer with a hand-driven "frame clock"
const frames = [];
const flushed = [];
const c = new Logic.TokenCoalescer(fn => {
    frames.push(fn);
    return frames.length;
}, id => {
    frames[id - 1] = null;
}, text => flushed.push(text));
c.push('a');
c.push('b');
c.push('c');
check('coalescer: one frame scheduled for a burst', frames.length, 1);
frames[0]();
check('coalescer: burst flushed once', flushed, ['abc']);
c.push('d');
check('coalescer: next token schedules a new frame', frames.length, 2);
c.flushNow();
check('coalescer: flushNow hands on and unschedules', [flushed, frames[1]], [['abc', 'd'], null]);
c.push('e');
c.cancel();
check('coalescer: cancel keeps text, drops frame', [flushed.length, frames[2]], [2, null]);
c.flushNow();
check('coalescer: kept text flushed later', flushed, ['abc', 'd', 'e']);

const u = i => ({role: 'user', content: `q${i}`});
const a = i => ({role: 'assistant', content: `a${i}`});
check('history: last two exchanges', Logic.trimHistory([u(1), a(1), u(2), a(2), u(3), a(3)], 2),
    [u(2), a(2), u(3), a(3)]);
check('history: system message kept',
    Logic.trimHistory([{role: 'system', content: 's'}, u(1), a(1), u(2)], 1),
    [{role: 'system', content: 's'}, u(2)]);
check('history: shorter than window', Logic.trimHistory([u(1), a(1)], 6), [u(1), a(1)]);

// the applications using the service: names, the Shell's own left out
const editor = {app_id: 'org.gnome.TextEditor', display_name: 'Text Editor', source: 'systemd', running: 1, queued: 1};
const notes = {app_id: 'notes-cli', source: 'exe', running: 0, queued: 2};
const shell = {app_id: 'gnome-shell', source: 'exe', running: 1, queued: 0};
const nameless = {app_id: '', source: 'unknown', running: 1, queued: 0};
check('in use: nobody', Logic.inUseText([]), '');
check('in use: only the Shell itself', [Logic.inUseText([shell]), Logic.inUseLine([shell])], ['', '']);
check('in use: display name', Logic.inUseText([shell, editor]), 'In use by Text Editor');
check('in use: app id without a display name', Logic.inUseText([notes]), 'In use by notes-cli');
check('in use: two', Logic.inUseText([editor, notes]), 'In use by Text Editor and notes-cli');
check('in use: three', Logic.inUseText([editor, notes, nameless]), 'In use by Text Editor and 2 others');
check('in use: four, the Shell left out', Logic.inUseText([editor, shell, notes, nameless, {app_id: 'x', running: 1}]),
    'In use by Text Editor and 3 others');
check('indicator with an application', Logic.indicatorText('cpu', ['tiny'], [shell, editor]),
    'CPU ● · In use by Text Editor');
check('in use: popup line with counts', Logic.inUseLine([editor, shell, notes, nameless]),
    'In use by: Text Editor (1 running, 1 waiting), notes-cli (2 waiting), an unknown program (1 running)');

// when ListApplications is asked: a hand-driven "bus"
const calls = [];
const shown = [];
const w = new Logic.ApplicationsWatch(done => calls.push(done), apps => shown.push(apps.map(x => x.app_id)));
w.countsChanged(0, 0);
check('apps watch: idle at start asks nothing, shows nothing', [calls.length, shown], [0, []]);
w.countsChanged(1, 0);
check('apps watch: a request asks once', calls.length, 1);
w.countsChanged(1, 1);
w.countsChanged(1, 2);
check('apps watch: changes while asking wait for the answer', calls.length, 1);
calls[0]([editor]);
check('apps watch: answer shown, then asked once more', [shown, calls.length], [[['org.gnome.TextEditor']], 2]);
calls[1]([editor, notes]);
check('apps watch: second answer shown, nothing more asked', [shown.length, calls.length], [2, 2]);
w.countsChanged(0, 0);
check('apps watch: idle clears without asking', [shown[2], calls.length], [[], 2]);
w.countsChanged(0, 1);
w.countsChanged(0, 0);
calls[2]([notes]);
check('apps watch: an answer after idle is dropped', [shown.length, calls.length], [3, 3]);
w.countsChanged(1, 0);
calls[3](null);
check('apps watch: a failed call (older npullmd) shows nothing', [shown.length, calls.length], [3, 4]);
w.countsChanged(2, 0);
calls[4]([editor]);
w.countsChanged(1, 0);
calls[5](null);
check('apps watch: a failed call clears what was shown', shown.slice(3), [['org.gnome.TextEditor'], []]);

print(`1..${n}`);
System.exit(failed ? 1 : 0);
