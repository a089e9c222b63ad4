// What the npullm extension decides without the Shell: indicator text,
// which models to offer, error messages in words, the per-frame token
// coalescer and the conversation window. No St/Clutter/Main imports here,
// so tests/applets/test_logic.js runs it under plain gjs.
/* exported setGettext, deviceLabel, indicatorText, usableModels, errorText,
   progressText, finishText, TokenCoalescer, trimHistory, MODEL_HINT */

// gettext is injected by the caller (the extension's domain; identity in tests)
let _ = s => s;
var setGettext = fn => {
    _ = fn;
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

// Panel text: the device, and a filled dot while a model is in memory.
function indicatorText(device, loadedModels) {
    const loaded = loadedModels && loadedModels.length > 0;
    return `${deviceLabel(device)} ${loaded ? '●' : '○'}`;
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
