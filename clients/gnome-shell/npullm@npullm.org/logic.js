// What the npullm extension decides without the Shell: indicator text,
// which models to offer, error messages in words, the per-frame token
// coalescer, the conversation window, and which applications use the
// service (when to ask, what to say). No St/Clutter/Main imports here,
// so tests/applets/test_logic.js runs it under plain gjs.
/* exported setGettext, deviceLabel, indicatorText, usableModels, errorText,
   progressText, finishText, TokenCoalescer, trimHistory, MODEL_HINT,
   SHELL_APP_IDS, appNames, inUseText, inUseLine, ApplicationsWatch */

// gettext and ngettext are injected by the caller (the extension's domain;
// identity in tests)
let _ = s => s;
let ngettext = (one, many, n) => n === 1 ? one : many;
var setGettext = (fn, nfn) => {
    _ = fn;
    if (nfn)
        ngettext = nfn;
};

// '%s'/'%d' placeholders in order (String.prototype.format is the Shell's,
// not plain gjs's).
function fmt(template, ...args) {
    let i = 0;
    return template.replace(/%[sd]/g, () => String(args[i++]));
}

// Where a user puts models when none is installed (docs/models.md).
var MODEL_HINT = 'npullm-client add FILE.gguf';

// `Device` property -> the short name on the panel.
function deviceLabel(device) {
    if (!device)
        return '…';
    if (device === 'cpu')
        return 'CPU';
    if (device === 'npu-emu')
        return 'NPU (emulated)';
    if (device.startsWith('npu'))
        return 'NPU';
    return device.toUpperCase();
}

// Panel text: the device, a filled dot while a model is in memory, and the
// other applications using the service (ListApplications' entries).
function indicatorText(device, loadedModels, apps = []) {
    const loaded = loadedModels && loadedModels.length > 0;
    const inUse = inUseText(apps);
    return `${deviceLabel(device)} ${loaded ? '●' : '○'}${inUse ? ` · ${inUse}` : ''}`;
}

// ListModels entries (plain objects: name, supported, vision, ...) -> the
// models that can answer, sorted by name.
function usableModels(models) {
    return models.filter(m => m.supported && m.name)
        .map(m => ({name: m.name, vision: Boolean(m.vision), loaded: Boolean(m.loaded)}))
        .sort((a, b) => a.name.localeCompare(b.name));
}

// An org.npullm.Error.* name (or null for a failure without one) and the
// message -> a sentence for the popup.
function errorText(dbusName, message) {
    const short = dbusName ? dbusName.replace(/^org\.npullm\.Error\./, '') : '';
    switch (short) {
    case 'NotAuthorized':
        return _('You are not allowed to use the assistant (polkit said no).');
    case 'Busy':
        return _('The assistant is busy: its queue is full. Try again in a moment.');
    case 'NoSuchModel':
        return _('That model is not installed any more. Pick another one.');
    case 'NotSupported':
        return _('This model cannot do that (a screenshot needs a model with vision).');
    case 'ModelLoadFailed':
        return fmt(_('The model could not be loaded: %s'), message);
    case 'ContextOverflow':
        return _('The conversation is too long for the model. Start a new one.');
    case 'InvalidArgument':
        return fmt(_('The request was refused: %s'), message);
    case 'Cancelled':
        return _('Stopped.');
    }
    if (/ServiceUnknown|NameHasNoOwner|not provided by any .service/.test(message || ''))
        return _('The npullm service is not running or not installed.');
    return fmt(_('Something went wrong: %s'), message || short);
}

// Request state (Npullm.RequestState nick) and queue position -> status line.
function progressText(state, queuePosition) {
    switch (state) {
    case 'queued':
        return queuePosition > 0
            ? fmt(_('Waiting: %d requests ahead'), queuePosition)
            : _('Waiting for the model…');
    case 'loading':
        return _('Loading the model…');
    case 'running':
        return _('Answering…');
    }
    return '';
}

// Finished reason -> status line ('' when nothing needs saying).
function finishText(reason) {
    switch (reason) {
    case 'stop':
    case 'length':
        return '';
    case 'cancelled':
        return _('Stopped.');
    }
    return fmt(_('The answer ended early (%s).'), reason);
}

// Collects token text and hands it on at most once per frame. `schedule(fn)`
// arranges one call of fn before the next frame and returns an id,
// `unschedule(id)` drops it (Meta.later_add/remove in the Shell).
var TokenCoalescer = class TokenCoalescer {
    constructor(schedule, unschedule, flush) {
        this._schedule = schedule;
        this._unschedule = unschedule;
        this._flush = flush;
        this._pending = '';
        this._id = 0;
    }

    push(text) {
        this._pending += text;
        if (!this._id) {
            this._id = this._schedule(() => {
                this._id = 0;
                this._emit();
                return false;
            });
        }
    }

    // Hands on what is pending now (before a finish message, say).
    flushNow() {
        this.cancel();
        this._emit();
    }

    // Drops the scheduled call; pending text stays.
    cancel() {
        if (this._id)
            this._unschedule(this._id);
        this._id = 0;
    }

    _emit() {
        if (this._pending === '')
            return;
        const text = this._pending;
        this._pending = '';
        this._flush(text);
    }
};

// [{role, content}] -> the last `exchanges` user/assistant pairs (a system
// message at the start stays).
function trimHistory(messages, exchanges) {
    const system = messages.length > 0 && messages[0].role === 'system' ? [messages[0]] : [];
    const rest = messages.slice(system.length);
    let users = 0;
    let start = rest.length;
    while (start > 0 && users < exchanges) {
        start--;
        if (rest[start].role === 'user')
            users++;
    }
    return system.concat(rest.slice(start));
}

// The ids npullmd gives the Shell itself (its executable, or its app id):
// the popup's own requests are not "another application".
var SHELL_APP_IDS = ['gnome-shell', 'org.gnome.Shell'];

// ListApplications entries ({app_id, display_name?, running, queued}) ->
// [{name, running, queued}] without the Shell's own, in the service's
// order. The name is the desktop file's, else the app id.
function appNames(apps, selfIds = SHELL_APP_IDS) {
    return (apps || []).filter(a => !selfIds.includes(a.app_id || ''))
        .map(a => ({
            name: a.display_name || a.app_id || _('an unknown program'),
            running: a.running || 0,
            queued: a.queued || 0,
        }));
}

// The panel's words: '' (nobody else), "In use by Text Editor", "In use by
// Text Editor and Notes", "In use by Text Editor and 2 others".
function inUseText(apps) {
    const names = appNames(apps).map(a => a.name);
    if (names.length === 0)
        return '';
    if (names.length === 1)
        return fmt(_('In use by %s'), names[0]);
    if (names.length === 2)
        return fmt(_('In use by %s and %s'), names[0], names[1]);
    const others = names.length - 1;
    return fmt(ngettext('In use by %s and %d other', 'In use by %s and %d others', others), names[0], others);
}

// The popup's line: every application with its counts, "In use by: Text
// Editor (1 running), Notes (2 waiting)"; '' when nobody else.
function inUseLine(apps) {
    const parts = appNames(apps).map(a => {
        const counts = [];
        if (a.running)
            counts.push(fmt(_('%d running'), a.running));
        if (a.queued)
            counts.push(fmt(_('%d waiting'), a.queued));
        return counts.length ? `${a.name} (${counts.join(', ')})` : a.name;
    });
    return parts.length ? fmt(_('In use by: %s'), parts.join(', ')) : '';
}

// Asks ListApplications when the request counts change, never otherwise
// (no polling): `fetch(done)` makes the call and calls done(apps), or
// done(null) when it failed (an older npullmd without the method, polkit
// said no: nothing is shown, as before); `update(apps)` shows them. At most
// one call is in flight; counts that change meanwhile ask once more after
// it. Idle (both counts 0) clears at once, without a call, and an answer
// that arrives after that is dropped.
var ApplicationsWatch = class ApplicationsWatch {
    constructor(fetch, update) {
        this._fetch = fetch;
        this._update = update;
        this._inFlight = false;
        this._again = false;
        this._idle = true;
        this._shown = false;
    }

    countsChanged(active, queued) {
        this._idle = !active && !queued;
        if (this._idle) {
            this._again = false;
            this._show([]);
        } else if (this._inFlight) {
            this._again = true;
        } else {
            this._ask();
        }
    }

    _ask() {
        this._inFlight = true;
        this._again = false;
        this._fetch(apps => {
            this._inFlight = false;
            if (this._idle)
                return;
            this._show(apps || []);
            if (this._again)
                this._ask();
        });
    }

    _show(apps) {
        // nothing to nothing is no change
        if (apps.length === 0 && !this._shown)
            return;
        this._shown = apps.length > 0;
        this._update(apps);
    }
};
