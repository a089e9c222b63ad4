#!/usr/bin/python3
"""The npullm GNOME Shell extension in a real, headless GNOME Shell 43,
against the real npullmd on a private system bus (the project's bus policy,
polkit mock) with the small test model: the indicator shows the device,
the shortcut opens the popup, the model picker offers the usable models, a
typed prompt streams an answer, a follow-up continues it, Copy copies it,
another application's request shows its name in the indicator and the
popup, Stop stops one, a screenshot question goes to the vision model, the
preferences window opens, an error is said in words with the question kept,
a PNG of the open popup is saved and is not blank, and disable() leaves
nothing behind.

Environment (tests/applets/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_TEST_MODEL, LIBNPULLM_DIR (libnpullm-1 and its typelib),
NPULLM_EXTENSION_DIR (the extension's folder), NPULLM_APPLET_ARTIFACTS
(where the screenshot goes)."""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "service"))
import npullm_testbus as tb  # noqa: E402
from gnome_shell_session import GnomeShell  # noqa: E402
from applet_models import model_dir  # noqa: E402
from desktop_app import APP_NAME, DesktopApp, use_desktop_files  # noqa: E402

import gi  # noqa: E402

gi.require_version("GdkPixbuf", "2.0")
from gi.repository import GdkPixbuf  # noqa: E402

UUID = "npullm@npullm.org"
IND = "Main.panel.statusArea['%s']" % UUID


def js(value):
    return json.dumps(value, ensure_ascii=False)


class GnomeShellExtensionTest(tb.ServiceTestCase):
    CONFIG = {"Models": {"MaxContext": "4096"}}
    make_model_dir = staticmethod(model_dir)

    @classmethod
    def setUpClass(cls):
        use_desktop_files()
        super().setUpClass()
        try:
            cls.shell = GnomeShell(os.path.join(cls.workdir, "shell"), cls.bus.address,
                                   {UUID: os.environ["NPULLM_EXTENSION_DIR"]}, os.environ["LIBNPULLM_DIR"])
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.shell.stop()
        super().tearDownClass()

    def eval(self, code):
        return json.loads(self.shell.eval(code))

    def press_keys(self, *names):
        """Presses the named keys (Clutter.KEY_*) in order, then releases
        them in reverse: a chord such as Super+period."""
        self.shell.eval("""
            const {Clutter, GLib} = imports.gi;
            const kb = global._npullmTestKeyboard;
            const keys = %s.map(n => Clutter[`KEY_${n}`]);
            let t = GLib.get_monotonic_time();
            keys.forEach(k => kb.notify_keyval(t++, k, Clutter.KeyState.PRESSED));
            keys.reverse().forEach(k => kb.notify_keyval(t++, k, Clutter.KeyState.RELEASED));
            true""" % js(list(names)))

    def type_text(self, text):
        """Types into whatever has key focus, through a virtual keyboard
        (the events a person's key presses make)."""
        self.shell.eval("""
            const {Clutter} = imports.gi;
            if (!global._npullmTestKeyboard)
                global._npullmTestKeyboard = Clutter.get_default_backend().get_default_seat()
                    .create_virtual_device(Clutter.InputDeviceType.KEYBOARD_DEVICE);
            const kb = global._npullmTestKeyboard;
            let t = GLib.get_monotonic_time();
            for (const ch of %s) {
                const keyval = ch === '\\n' ? Clutter.KEY_Return : Clutter.unicode_to_keysym(ch.codePointAt(0));
                kb.notify_keyval(t++, keyval, Clutter.KeyState.PRESSED);
                kb.notify_keyval(t++, keyval, Clutter.KeyState.RELEASED);
            }
            true""".replace("GLib.", "imports.gi.GLib.") % js(text))

    def open_popup(self):
        # the Shell starts in the overview, which drops key focus when it hides
        self.eval("Main.overview.hide(); true")
        self.shell.wait_eval("!Main.overview.visible && !Main.overview.animationInProgress")
        self.eval("%s.menu.open(false); true" % IND)
        self.shell.wait_eval("%s.menu.isOpen && global.stage.key_focus === %s._entry.clutter_text" % (IND, IND))
        # and it stays there (nothing of the Shell's own took it back)
        time.sleep(0.3)
        self.shell.wait_eval("%s.menu.isOpen && global.stage.key_focus === %s._entry.clutter_text" % (IND, IND))

    def ask(self, prompt):
        """Types the prompt and Return; waits until the request is over."""
        self.open_popup()
        self.type_text(prompt)
        self.shell.wait_eval("%s._entry.get_text()" % IND, want=js(prompt))
        before = self.eval("%s._turns.length" % IND)
        self.type_text("\n")
        # Return took the question (a new turn), then the request ended
        self.shell.wait_eval("%s._request === null && !%s._starting && %s._turns.length > %d"
                             % (IND, IND, IND, before), timeout=120)
        return self.eval("[%s._turns, %s._statusLabel.text, %s._historyLabel.text, %s._entry.get_text()]"
                         % (IND, IND, IND, IND))

    def test_1_indicator_shows_device(self):
        self.shell.wait_eval("%s !== undefined" % IND)
        self.shell.wait_eval("%s._panelLabel.text" % IND, want=js("CPU ○"))
        self.open_popup()
        device = self.eval("%s._deviceItem.label.text" % IND)
        self.assertTrue(device.startswith("CPU — no model loaded"), device)

    def test_2_shortcut_opens_popup(self):
        self.type_text("")  # creates the virtual keyboard
        self.eval("%s.menu.close(false); true" % IND)
        self.shell.wait_eval("!%s.menu.isOpen" % IND)
        self.press_keys("Super_L", "period")
        self.shell.wait_eval("%s.menu.isOpen" % IND)

    def test_2_model_picker_offers_usable_models(self):
        self.open_popup()
        self.shell.wait_eval("%s._modelMenu.menu._getMenuItems().length" % IND, want="3")
        labels = self.eval("%s._modelMenu.menu._getMenuItems().map(i => i.label.text)" % IND)
        self.assertEqual(labels, ["tiny", "tiny2", "vision (sees images)"])  # broken.gguf is not offered

    def test_3_prompt_streams_answer(self):
        turns, status, history, _ = self.ask("Hello there")
        self.assertEqual([t["role"] for t in turns], ["user", "assistant"])
        self.assertEqual(turns[0]["content"], "Hello there")
        self.assertNotEqual(turns[1]["content"], "")
        self.assertEqual(status, "")
        self.assertIn(turns[1]["content"], history)
        # the model is in memory now, and the indicator says so
        self.shell.wait_eval("%s._panelLabel.text" % IND, want=js("CPU ●"))
        # a follow-up continues the conversation (Chat with the history)
        turns, status, history, _ = self.ask("And then?")
        self.assertEqual([t["role"] for t in turns], ["user", "assistant"] * 2)
        # Copy puts the last answer on the clipboard
        self.eval("""delete global._npullmTestClip; %s._copyButton.emit('clicked', 1);
            St.Clipboard.get_default().get_text(St.ClipboardType.CLIPBOARD, (c, text) => {
                global._npullmTestClip = text;
            }); true""".replace("St.", "imports.gi.St.") % IND)
        self.shell.wait_eval("global._npullmTestClip === %s._turns[3].content" % IND)
        self.assertEqual(self.eval("global._npullmTestClip"), turns[3]["content"])
        # the popup keeps its width and wraps the answer
        self.assertLess(self.eval("%s.menu.actor.width" % IND), 560)
        self.shell.screenshot(os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], "gnome-shell-extension.png"))

    def test_3a_other_application_in_indicator(self):
        # the Shell's own requests are not named: nothing shown so far
        self.assertNotIn("In use", self.eval("%s._panelLabel.text" % IND))
        with DesktopApp(self.workdir, self.bus.env) as app:
            self.assertEqual([a["display_name"] for a in app.applications], [APP_NAME])
            self.shell.wait_eval("%s._panelLabel.text.replace(/^CPU [●○] /, '')" % IND,
                                 want=js("· In use by " + APP_NAME))
            self.open_popup()
            self.shell.wait_eval("%s._deviceItem.label.text.split('\\n')[1]" % IND,
                                 want=js("In use by: %s (1 running)" % APP_NAME))
            self.shell.screenshot(os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], "gnome-shell-in-use.png"))
        # its request went with it: nothing shown again
        self.shell.wait_eval("/^CPU [●○]$/.test(%s._panelLabel.text) && %s._deviceItem.label.text.split('\\n').length"
                             % (IND, IND), want="2")

    def test_4_stop(self):
        # Stop is clicked as soon as the first token is on screen
        self.eval("""%s._settings.set_int('max-tokens', 3000);
            global._npullmTestStop = %s.connect('request-started', (ind, request) => {
                const id = request.connect('token', () => {
                    request.disconnect(id);
                    ind._stopButton.emit('clicked', 1);
                });
            }); true""" % (IND, IND))
        try:
            turns, status, _, _ = self.ask("Tell me a very long story")
        finally:
            self.eval("%s.disconnect(global._npullmTestStop); %s._settings.reset('max-tokens'); true" % (IND, IND))
        self.assertEqual((self.eval("%s._lastFinishReason" % IND), status), ("cancelled", "Stopped."))
        self.assertEqual(turns[-1]["role"], "assistant")

    def test_5_error_in_words_keeps_question(self):
        self.eval("%s._model = 'no-such-model'; true" % IND)
        try:
            turns_before = self.eval("%s._turns.length" % IND)
            self.open_popup()
            self.type_text("Where did it go?\n")
            self.shell.wait_eval("%s._statusLabel.text" % IND,
                                 want=js("That model is not installed any more. Pick another one."))
            self.assertEqual(self.eval("%s._entry.get_text()" % IND), "Where did it go?")
            self.assertEqual(self.eval("%s._turns.length" % IND), turns_before)
        finally:
            self.eval("%s._model = ''; %s._entry.set_text(''); true" % (IND, IND))

    def test_6_screenshot_not_blank(self):
        path = os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], "gnome-shell-extension.png")
        self.assertTrue(os.path.exists(path), "test_3 saves the screenshot")
        pixbuf = GdkPixbuf.Pixbuf.new_from_file(path)
        self.assertEqual((pixbuf.get_width(), pixbuf.get_height()), (1280, 800))
        # the popup hangs below the top bar on the right: many colours there
        # (text, buttons), not one flat fill
        popup = pixbuf.new_subpixbuf(1280 - 480, 32, 480, 400)
        data = popup.read_pixel_bytes().get_data()
        stride, n = popup.get_rowstride(), popup.get_n_channels()
        colours = {data[y * stride + x * n: y * stride + x * n + 3]
                   for y in range(0, 400, 2) for x in range(0, 480, 2)}
        self.assertGreater(len(colours), 20, "the popup area is (nearly) blank")

    def test_7_ask_about_screenshot(self):
        self.eval("%s._model = 'vision'; %s._newConversation(); true" % (IND, IND))
        try:
            self.open_popup()
            self.type_text("What is on the screen?")
            self.shell.wait_eval("%s._entry.get_text()" % IND, want=js("What is on the screen?"))
            self.eval("%s._shotButton.emit('clicked', 1); true" % IND)
            self.shell.wait_eval("%s._turns.length === 2 && %s._request === null && !%s._starting"
                                 % (IND, IND, IND), timeout=120)
            turns, status = self.eval("[%s._turns, %s._statusLabel.text]" % (IND, IND))
        finally:
            self.eval("%s._model = ''; true" % IND)
        self.assertEqual(status, "")
        self.assertEqual(turns[0]["content"], "What is on the screen?")
        self.assertNotEqual(turns[1]["content"], "")

    def test_8_preferences_window(self):
        env = self.shell.env
        self.eval("%s.menu.close(false); true" % IND)
        subprocess.run(["gnome-extensions", "prefs", UUID], env=env, check=True, timeout=30,
                       capture_output=True)
        self.shell.wait_eval("global.get_window_actors().some(a => a.meta_window.get_title() === %s)"
                             % js("npullm Assistant"), timeout=60)
        # shown and drawn (its map animation is over)
        self.shell.wait_eval("global.get_window_actors().some(a => a.meta_window.get_title() === %s && "
                             "a.visible && a.opacity === 255 && a.scale_x === 1)" % js("npullm Assistant"))
        self.shell.screenshot(os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], "gnome-shell-prefs.png"))
        self.eval("global.get_window_actors().forEach(a => a.meta_window.delete(global.get_current_time())); true")

    def test_9_disable_leaves_nothing(self):
        self.eval("Main.extensionManager.disableExtension(%s); true" % js(UUID))
        self.shell.wait_eval("%s === undefined" % IND)
        c = self.client()
        self.wait_idle(c)
        self.eval("Main.extensionManager.enableExtension(%s); true" % js(UUID))
        self.shell.wait_eval("%s !== undefined" % IND)


if __name__ == "__main__":
    sys.exit(tb.run_tap(__name__))
