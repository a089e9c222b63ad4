// Preferences window of the npullm Assistant (gnome-extensions prefs):
// default model, longest answer, conversation length, keyboard shortcut.
/* exported init, fillPreferencesWindow, buildPage */

const {Adw, Gio, Gtk} = imports.gi;
const ExtensionUtils = imports.misc.extensionUtils;
const _ = ExtensionUtils.gettext;

function init() {
    ExtensionUtils.initTranslations();
}

function spinRow(settings, key, title) {
    const range = settings.settings_schema.get_key(key).get_range().deepUnpack()[1].deepUnpack();
    const spin = Gtk.SpinButton.new_with_range(range[0], range[1], 1);
    spin.valign = Gtk.Align.CENTER;
    settings.bind(key, spin, 'value', Gio.SettingsBindFlags.DEFAULT);
    const row = new Adw.ActionRow({title});
    row.add_suffix(spin);
    return row;
}

function entryRow(title, text, apply) {
    const entry = new Gtk.Entry({text, valign: Gtk.Align.CENTER, hexpand: true});
    entry.connect('changed', () => apply(entry));
    const row = new Adw.ActionRow({title});
    row.add_suffix(entry);
    return row;
}

// The page, on its own so that tests build it without a preferences window.
function buildPage(settings) {
    const page = new Adw.PreferencesPage();
    const group = new Adw.PreferencesGroup({title: _('Assistant')});
    page.add(group);
    group.add(entryRow(_('Default model (empty: the service\'s default)'), settings.get_string('default-model'),
        entry => settings.set_string('default-model', entry.text.trim())));
    group.add(spinRow(settings, 'max-tokens', _('Longest answer (tokens)')));
    group.add(spinRow(settings, 'history-length', _('Exchanges remembered for follow-up questions')));
    group.add(entryRow(_('Shortcut that opens the assistant'), settings.get_strv('open-shortcut').join(' '),
        entry => {
            // only accelerators GTK understands are stored
            const accels = entry.text.split(/\s+/).filter(a => a !== '');
            const valid = accels.every(a => Gtk.accelerator_parse(a)[0]);
            entry.remove_css_class('error');
            if (valid)
                settings.set_strv('open-shortcut', accels);
            else
                entry.add_css_class('error');
        }));
    return page;
}

function fillPreferencesWindow(window) {
    window.add(buildPage(ExtensionUtils.getSettings()));
}
