// npullm Assistant for GNOME Shell 43: a panel indicator (device, model
// loaded, the other applications using the service) and a popup that asks
// npullmd through libnpullm-1. Every D-Bus call is asynchronous (the
// compositor thread never waits), tokens are coalesced into one redraw per
// frame, and disable() cancels what is in flight and drops every signal
// connection.
/* exported init */

const {Gio, GLib, GObject, Meta, Shell, St} = imports.gi;
const ExtensionUtils = imports.misc.extensionUtils;
const Main = imports.ui.main;
const PanelMenu = imports.ui.panelMenu;
const PopupMenu = imports.ui.popupMenu;

const Me = ExtensionUtils.getCurrentExtension();
const Logic = Me.imports.logic;
const _ = ExtensionUtils.gettext;

// libnpullm-1 through GObject introspection; missing when the library is not
// installed, which the indicator then says instead of failing to load.
let Npullm = null;
let npullmMissing = '';
try {
    imports.gi.versions.Npullm = '1.0';
    Npullm = imports.gi.Npullm;
} catch (e) {
    npullmMissing = e.message;
}

// GLib.Error -> its org.npullm.Error.* name (or the remote D-Bus name).
function dbusErrorName(error) {
    if (Npullm && error instanceof GLib.Error && error.domain === Npullm.error_quark())
        return Npullm.error_to_dbus_name(error.code);
    if (error instanceof GLib.Error && Gio.DBusError.is_remote_error(error))
        return Gio.DBusError.get_remote_error(error);
    return null;
}

function errorMessage(error) {
    return Logic.errorText(dbusErrorName(error), error.message);
}

const Indicator = GObject.registerClass({
    Signals: {
        // a request was accepted by the service (before any of its tokens)
        'request-started': {param_types: [GObject.TYPE_OBJECT]},
    },
}, class NpullmIndicator extends PanelMenu.Button {
    _init(settings) {
        super._init(0.0, _('npullm Assistant'));
        this._settings = settings;
        this._cancellable = new Gio.Cancellable();
        this._client = null;
        this._clientSignals = [];
        this._request = null;
        this._requestSignals = [];
        this._turns = []; // [{role, content}] shown and sent as context
        this._model = settings.get_string('default-model');
        this._models = [];
        this._apps = []; // ListApplications' answer (the Shell's own left out when shown)
        this._appsWatch = new Logic.ApplicationsWatch(done => this._listApplications(done), apps => {
            this._apps = apps;
            this._syncDevice();
        });
        this._coalescer = new Logic.TokenCoalescer(
            fn => Meta.later_add(Meta.LaterType.BEFORE_REDRAW, fn),
            id => Meta.later_remove(id),
            text => this._appendAnswer(text));

        this._panelLabel = new St.Label({
            text: Logic.indicatorText('', []),
            y_align: 2, // Clutter.ActorAlign.CENTER
            style_class: 'npullm-panel-label',
        });
        this.add_child(this._panelLabel);
        this._buildPopup();

        this.menu.connect('open-state-changed', (menu, open) => {
            if (!open)
                return;
            this._refreshModels();
            // after the menu manager's grab, which focuses the menu itself
            if (!this._focusLater) {
                this._focusLater = Meta.later_add(Meta.LaterType.BEFORE_REDRAW, () => {
                    this._focusLater = 0;
                    if (this.menu.isOpen)
                        this._entry.grab_key_focus();
                    return false;
                });
            }
        });
        this.connect('destroy', () => this._onDestroy());

        if (Npullm) {
            Npullm.Client.new_async(null, this._cancellable, (o, res) => this._onClient(res));
        } else {
            this._setStatus(_('libnpullm-1 is not installed: %s').format(npullmMissing));
        }
    }

    _buildPopup() {
        this._deviceItem = new PopupMenu.PopupMenuItem('', {reactive: false});
        this._deviceItem.label.add_style_class_name('npullm-device');
        this._deviceItem.label.clutter_text.line_wrap = true;
        this.menu.addMenuItem(this._deviceItem);
        this._modelMenu = new PopupMenu.PopupSubMenuMenuItem(_('Model'));
        this.menu.addMenuItem(this._modelMenu);
        this.menu.addMenuItem(new PopupMenu.PopupSeparatorMenuItem());

        const item = new PopupMenu.PopupBaseMenuItem({reactive: false, can_focus: false});
        const box = new St.BoxLayout({vertical: true, style_class: 'npullm-box', x_expand: true});
        item.add_child(box);
        this.menu.addMenuItem(item);

        this._historyLabel = new St.Label({style_class: 'npullm-history', x_expand: true});
        this._historyLabel.clutter_text.line_wrap = true;
        this._historyLabel.clutter_text.ellipsize = 0; // Pango.EllipsizeMode.NONE
        this._scroll = new St.ScrollView({style_class: 'npullm-scroll', x_expand: true, y_expand: true});
        this._scroll.set_policy(St.PolicyType.NEVER, St.PolicyType.AUTOMATIC);
        const inner = new St.BoxLayout({vertical: true});
        inner.add_child(this._historyLabel);
        this._scroll.add_actor(inner);
        // keep the newest text in view as the answer grows
        const adjustment = this._scroll.vscroll.adjustment;
        adjustment.connect('notify::upper', () => {
            adjustment.value = adjustment.upper - adjustment.page_size;
        });
        box.add_child(this._scroll);

        this._statusLabel = new St.Label({style_class: 'npullm-status', x_expand: true});
        this._statusLabel.clutter_text.line_wrap = true;
        box.add_child(this._statusLabel);

        this._entry = new St.Entry({
            hint_text: _('Ask anything…'),
            can_focus: true,
            x_expand: true,
            style_class: 'npullm-entry',
        });
        this._entry.clutter_text.connect('activate', () => this._ask());
        box.add_child(this._entry);

        const buttons = new St.BoxLayout({style_class: 'npullm-buttons', x_expand: true});
        const button = (label, callback) => {
            const b = new St.Button({label, style_class: 'button npullm-button', can_focus: true});
            b.connect('clicked', callback);
            buttons.add_child(b);
            return b;
        };
        this._askButton = button(_('Ask'), () => this._ask());
        this._stopButton = button(_('Stop'), () => this._stop());
        this._copyButton = button(_('Copy'), () => this._copy());
        this._shotButton = button(_('Screenshot…'), () => this._askScreenshot());
        this._shotButton.accessible_name = _('Ask about a screenshot');
        this._newButton = button(_('New'), () => this._newConversation());
        box.add_child(buttons);
        this._syncButtons();
        this._render();
    }

    _onClient(res) {
        try {
            this._client = Npullm.Client.new_finish(res);
        } catch (e) {
            if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                this._setStatus(errorMessage(e));
            return;
        }
        for (const prop of ['device', 'device-status', 'loaded-models', 'default-model'])
            this._clientSignals.push(this._client.connect(`notify::${prop}`, () => this._syncDevice()));
        for (const prop of ['active-requests', 'queued-requests'])
            this._clientSignals.push(this._client.connect(`notify::${prop}`, () => this._syncApplications()));
        this._syncDevice();
        this._syncApplications();
        this._syncButtons();
    }

    _syncDevice() {
        const c = this._client;
        const loaded = c.loaded_models || [];
        this._panelLabel.text = Logic.indicatorText(c.device, loaded, this._apps);
        const model = loaded.length ? _('model loaded: %s').format(loaded.join(', ')) : _('no model loaded');
        // who else uses it before the (long) device status
        const users = Logic.inUseLine(this._apps);
        const lines = [`${Logic.deviceLabel(c.device)} — ${model}`, ...(users ? [users] : []), c.device_status || ''];
        this._deviceItem.label.text = lines.join('\n');
        this._modelMenu.label.text = _('Model: %s').format(this._model || c.default_model || _('none'));
    }

    _syncApplications() {
        this._appsWatch.countsChanged(this._client.active_requests, this._client.queued_requests);
    }

    // ListApplications: done(apps), or done(null) when it failed, e.g. an
    // npullmd without the method. The library never asks for a password
    // here: nobody asked for this.
    _listApplications(done) {
        this._client.list_applications_async(this._cancellable, (c, res) => {
            let apps;
            try {
                apps = c.list_applications_finish(res).recursiveUnpack();
            } catch (e) {
                if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                    return; // disabled: nothing to show any more
                apps = null;
            }
            done(apps);
        });
    }

    _refreshModels() {
        if (!this._client)
            return;
        this._client.list_models_async(this._cancellable, (c, res) => {
            let models;
            try {
                models = c.list_models_finish(res).recursiveUnpack();
            } catch (e) {
                if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                    this._setStatus(errorMessage(e));
                return;
            }
            this._models = Logic.usableModels(models);
            this._modelMenu.menu.removeAll();
            for (const m of this._models) {
                const label = m.vision ? _('%s (sees images)').format(m.name) : m.name;
                const mi = new PopupMenu.PopupMenuItem(label);
                if (m.name === (this._model || this._client.default_model))
                    mi.setOrnament(PopupMenu.Ornament.DOT);
                mi.connect('activate', () => {
                    this._model = m.name;
                    this._syncDevice();
                });
                this._modelMenu.menu.addMenuItem(mi);
            }
            if (this._models.length === 0)
                this._setStatus(_('No models are installed. Add one with: %s').format(Logic.MODEL_HINT));
            this._syncDevice();
        });
    }

    _options() {
        const opts = new Npullm.Options({'max-tokens': this._settings.get_int('max-tokens')});
        if (this._model)
            opts.model = this._model;
        return opts;
    }

    _ask() {
        const prompt = this._entry.get_text().trim();
        if (!prompt || !this._client || this._request || this._starting)
            return;
        this._entry.set_text('');
        this._turns = Logic.trimHistory(this._turns, this._settings.get_int('history-length'));
        this._turns.push({role: 'user', content: prompt});
        const conversation = new Npullm.Conversation();
        for (const t of this._turns)
            conversation.add_message(t.role, t.content);
        this._start(prompt, cb => this._client.chat_async(conversation, this._options(), this._cancellable, cb),
            res => this._client.chat_finish(res));
    }

    // Shoots the primary monitor with the Shell's own screenshot API (with
    // the popup closed) and asks about it with DescribeImage.
    _askScreenshot() {
        if (!this._client || this._request || this._starting)
            return;
        const prompt = this._entry.get_text().trim();
        this._entry.set_text('');
        this._starting = true;
        this._syncButtons();
        this.menu.close();
        this._shotSource = GLib.timeout_add(GLib.PRIORITY_DEFAULT, 300, () => {
            this._shotSource = 0;
            const m = Main.layoutManager.primaryMonitor;
            const stream = Gio.MemoryOutputStream.new_resizable();
            new Shell.Screenshot().screenshot_area(m.x, m.y, m.width, m.height, stream, (shot, res) => {
                if (this._destroyed) // disabled while the screenshot was taken
                    return;
                this._starting = false;
                try {
                    shot.screenshot_area_finish(res);
                    stream.close(null);
                } catch (e) {
                    this._setStatus(_('The screenshot failed: %s').format(e.message));
                    this._syncButtons();
                    return;
                }
                this.menu.open();
                const image = Gio.MemoryInputStream.new_from_bytes(stream.steal_as_bytes());
                this._turns.push({role: 'user', content: prompt || _('(about a screenshot)')});
                this._start(prompt, cb => this._client.describe_image_stream_async(image, prompt, this._options(),
                    this._cancellable, cb), res => this._client.describe_image_stream_finish(res));
            });
            return GLib.SOURCE_REMOVE;
        });
    }

    // start(cb) sends the request, finish(res) returns its Npullm.Request.
    _start(prompt, start, finish) {
        this._starting = true;
        this._turns.push({role: 'assistant', content: ''});
        this._setStatus(_('Sending…'));
        this._render();
        this._syncButtons();
        start((c, res) => {
            this._starting = false;
            let request;
            try {
                request = finish(res);
            } catch (e) {
                if (e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED))
                    return;
                // nothing was answered: the question goes back to the entry
                this._turns.splice(-2, 2);
                this._entry.set_text(prompt);
                this._setStatus(errorMessage(e));
                this._render();
                this._syncButtons();
                return;
            }
            this._request = request;
            this._requestSignals = [
                request.connect('token', (r, text) => this._coalescer.push(text)),
                request.connect('finished', (r, reason) => this._onFinished(reason)),
                request.connect('notify::state', () => this._syncProgress()),
                request.connect('notify::queue-position', () => this._syncProgress()),
            ];
            this._syncProgress();
            this._syncButtons();
            this.emit('request-started', request);
        });
    }

    _syncProgress() {
        const r = this._request;
        const names = {
            [Npullm.RequestState.QUEUED]: 'queued',
            [Npullm.RequestState.LOADING]: 'loading',
            [Npullm.RequestState.RUNNING]: 'running',
        };
        this._setStatus(Logic.progressText(names[r.state] || '', r.queue_position));
    }

    _appendAnswer(text) {
        const last = this._turns[this._turns.length - 1];
        if (last && last.role === 'assistant')
            last.content += text;
        this._render();
    }

    _onFinished(reason) {
        this._coalescer.flushNow();
        this._lastFinishReason = reason;
        const request = this._request;
        this._dropRequest();
        let status = Logic.finishText(reason);
        if (reason === 'error') {
            try {
                request.propagate_error();
            } catch (e) {
                status = errorMessage(e);
            }
        }
        this._setStatus(status);
        this._syncButtons();
    }

    _dropRequest() {
        if (!this._request)
            return;
        for (const id of this._requestSignals)
            this._request.disconnect(id);
        this._requestSignals = [];
        this._request = null;
    }

    _stop() {
        if (this._request)
            this._request.cancel();
    }

    _copy() {
        const answers = this._turns.filter(t => t.role === 'assistant' && t.content);
        if (answers.length === 0)
            return;
        St.Clipboard.get_default().set_text(St.ClipboardType.CLIPBOARD, answers[answers.length - 1].content);
        this._setStatus(_('Answer copied.'));
    }

    _newConversation() {
        if (this._request || this._starting)
            return;
        this._turns = [];
        this._setStatus('');
        this._render();
    }

    _render() {
        const shown = this._turns.map(t => t.role === 'user' ? `› ${t.content}` : t.content);
        this._historyLabel.text = shown.join('\n\n');
    }

    _setStatus(text) {
        this._statusLabel.text = text;
        this._statusLabel.visible = text !== '';
    }

    _syncButtons() {
        const busy = Boolean(this._request) || Boolean(this._starting);
        this._askButton.reactive = Boolean(this._client) && !busy;
        this._shotButton.reactive = Boolean(this._client) && !busy;
        this._stopButton.reactive = Boolean(this._request);
        this._newButton.reactive = !busy;
    }

    _onDestroy() {
        this._destroyed = true;
        this._cancellable.cancel();
        if (this._focusLater)
            Meta.later_remove(this._focusLater);
        if (this._shotSource)
            GLib.source_remove(this._shotSource);
        this._coalescer.cancel();
        if (this._request)
            this._request.cancel();
        this._dropRequest();
        for (const id of this._clientSignals)
            this._client.disconnect(id);
        this._clientSignals = [];
        this._client = null;
    }
});

class Extension {
    enable() {
        this._settings = ExtensionUtils.getSettings();
        this._indicator = new Indicator(this._settings);
        Main.panel.addToStatusArea(Me.uuid, this._indicator);
        Main.wm.addKeybinding('open-shortcut', this._settings, Meta.KeyBindingFlags.NONE,
            Shell.ActionMode.NORMAL | Shell.ActionMode.OVERVIEW, () => this._indicator.menu.toggle());
    }

    disable() {
        Main.wm.removeKeybinding('open-shortcut');
        this._indicator.destroy();
        this._indicator = null;
        this._settings = null;
    }
}

function init() {
    ExtensionUtils.initTranslations();
    Logic.setGettext(_, ExtensionUtils.ngettext);
    return new Extension();
}
