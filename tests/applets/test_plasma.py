#!/usr/bin/python3
"""The npullm Plasma widget in plasmoidviewer (Plasma 5.27) on an Xvfb
display, against the real npullmd on a private system bus (the project's
bus policy, polkit mock) with the small test models, driven by xdotool as a
person would: the indicator shows the device, the model picker offers the
usable models, a typed prompt streams an answer, a follow-up continues it,
Copy copies it, a request waiting behind another shows its queue position
(and the other client's application, named by its executable) and Stop
stops it, npullmd stopping and coming back is followed, "Ask about a screenshot" with a text-only
model is refused in words and answered by the vision model, a PNG of the
open widget is saved and is not blank, and closing the viewer leaves the
service idle. In a panel: a click opens the popup, a question is answered,
and another application's request shows its name ("Text Editor", from its
desktop file) in the indicator and the popup.

Environment (tests/applets/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_TEST_MODEL, NPULLM_TEST_VISION_MODEL, NPULLM_TEST_MMPROJ,
NPULLM_PLASMA_PACKAGE (the plasmoid folder), NPULLM_PLASMA_QML (the
build folder's QML import path with the plugin), NPULLM_APPLET_ARTIFACTS
(where the screenshot goes)."""

import os
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "service"))
import npullm_testbus as tb  # noqa: E402
from applet_models import model_dir  # noqa: E402
from desktop_app import APP_NAME, DesktopApp, use_desktop_files  # noqa: E402
from plasma_session import PlasmoidViewer  # noqa: E402

import gi  # noqa: E402

gi.require_version("GdkPixbuf", "2.0")
from gi.repository import GdkPixbuf, Gio, GLib  # noqa: E402

SCREENSHOT = "plasma-widget.png"


def assert_not_blank(test, path, rect):
    """The screenshot at path is the whole Xvfb screen, and the widget's
    area [x, y, w, h] in it has many colours (text, buttons), not one flat
    fill."""
    pixbuf = GdkPixbuf.Pixbuf.new_from_file(path)
    test.assertEqual((pixbuf.get_width(), pixbuf.get_height()), (1280, 800))
    x, y, w, h = rect
    area = pixbuf.new_subpixbuf(max(0, x), max(0, y), min(w, 1280 - x), min(h, 800 - y))
    data = area.read_pixel_bytes().get_data()
    stride, n = area.get_rowstride(), area.get_n_channels()
    colours = {data[r * stride + c * n: r * stride + c * n + 3]
               for r in range(0, area.get_height(), 2) for c in range(0, area.get_width(), 2)}
    test.assertGreater(len(colours), 20, "the widget's area is (nearly) blank")



def visible(text):
    """text without whitespace, control and format characters"""
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp"))

class ViewerTestCase(tb.ServiceTestCase):
    """npullmd and plasmoidviewer with the widget, for the tests of a
    class; VIEWER: PlasmoidViewer's keyword arguments."""

    VIEWER = {}

    @classmethod
    def setUpClass(cls):
        use_desktop_files()
        super().setUpClass()
        try:
            cls.viewer = PlasmoidViewer(os.path.join(cls.workdir, "plasma"), cls.bus.address,
                                        os.environ["NPULLM_PLASMA_PACKAGE"], os.environ["NPULLM_PLASMA_QML"],
                                        **cls.VIEWER)
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.viewer.stop()
        super().tearDownClass()


class PlasmaWidgetTest(ViewerTestCase):
    # one request runs at a time: test_4 holds the slot to keep the
    # widget's request waiting, so that Stop has something to stop
    CONFIG = {"Models": {"MaxContext": "4096"}, "Limits": {"MaxRunning": "1"}}
    make_model_dir = staticmethod(model_dir)

    def clear_entry(self):
        if self.viewer.state()["entry"]:
            self.viewer.key("ctrl+a", "BackSpace")
            self.viewer.wait_state(lambda s: s["entry"] == "", what="the entry cleared")

    def ask(self, prompt, wait=True, before_return=None):
        """Clicks into the entry, types the prompt and Return; waits until
        the request is over (with wait). Returns the state."""
        v = self.viewer
        before = len(v.wait_state(lambda s: not s["busy"], what="no request running")["turns"])
        v.click(v.state()["prompt"])
        v.wait_state(lambda s: s["entryFocused"], what="the entry has the focus")
        self.clear_entry()
        v.type_text(prompt)
        v.wait_state(lambda s: s["entry"] == prompt, what="the prompt typed in the entry")
        if before_return:
            before_return()
        v.key("Return")
        if not wait:
            return v.wait_state(lambda s: s["busy"] and len(s["turns"]) > before, what="the request sent")
        return v.wait_state(lambda s: not s["busy"] and len(s["turns"]) > before and s["entry"] == "",
                            timeout=120, what="the answer to %r" % prompt)

    def hold_the_slot(self, client, model, paths):
        """Another client's long answer on `model`, which then runs the
        one request it may run (MaxRunning 1)."""
        paths.append(client.generate("Tell me a very long story",
                                     {"model": GLib.Variant("s", model), "max_tokens": GLib.Variant("u", 4000)}))
        client.wait(lambda: client.prop("ActiveRequests") == 1)

    def test_1_indicator_shows_device(self):
        s = self.viewer.wait_state(lambda s: s["indicator"] == "CPU ○", what="the device in the indicator")
        self.assertEqual(s["deviceLine"], "CPU — no model loaded")

    def test_2_model_picker_offers_usable_models(self):
        s = self.viewer.wait_state(lambda s: len(s["models"]) == 3, what="the model list")
        self.assertEqual(s["models"], ["tiny", "tiny2", "vision (sees images)"])  # broken.gguf is not offered
        self.assertEqual(s["pickerText"], "tiny")  # the service's DefaultModel

    def test_3_prompt_streams_answer(self):
        v = self.viewer
        s = self.ask("Hello there")
        turns = s["turns"]
        self.assertEqual([t["role"] for t in turns], ["user", "assistant"])
        self.assertEqual(turns[0]["content"], "Hello there")
        self.assertNotEqual(turns[1]["content"], "")
        self.assertEqual(s["status"], "")
        # (the random model's answer may hold any control character, and the
        # text view turns \r, \n and the Unicode separators into line breaks
        # of its own: compare the visible characters)
        self.assertIn(visible(turns[1]["content"]), visible(s["history"]))
        # the model is in memory now, and the indicator says so
        v.wait_state(lambda s: s["indicator"] == "CPU ●" and s["deviceLine"] == "CPU — model loaded: tiny",
                     what="the loaded model in the indicator")
        # a follow-up continues the conversation (Chat with the history)
        s = self.ask("And then?")
        self.assertEqual([t["role"] for t in s["turns"]], ["user", "assistant"] * 2)
        # Copy puts the last answer on the clipboard
        v.click(s["copy"])
        v.wait_state(lambda s: s["status"] == "Answer copied.", what="Copy")
        self.assertEqual(v.clipboard(), s["turns"][3]["content"])
        v.screenshot(os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], SCREENSHOT))

    def test_4_queue_position_and_stop(self):
        v = self.viewer
        # another client's long answer holds the one slot, started once
        # the question is typed (it must not end before Stop is clicked)
        c = self.client()
        blocker = []
        try:
            self.ask("Are you there?", wait=False, before_return=lambda: self.hold_the_slot(c, "tiny", blocker))
            s = v.wait_state(lambda s: s["status"] == "Waiting: 1 request ahead", what="the queue position")
            self.assertTrue(s["busy"])
            # the other client is this test: its executable, named as its
            # desktop file says where there is one (Debian's python3.11.desktop
            # says "Python (v3.11)"); the widget's own request is not named
            exe = os.path.basename(os.path.realpath(sys.executable))
            info = Gio.DesktopAppInfo.new(exe + ".desktop")
            name = info.get_display_name() if info else exe
            s = v.wait_state(lambda s: s["inUseLine"] == "In use by: %s (1 running)" % name,
                             what="the other application in the popup")
            self.assertEqual(s["indicator"], "CPU ● · In use by " + name)
            v.click(s["stop"])
            s = v.wait_state(lambda s: not s["busy"], what="the request stopped")
            # the slot was held all along
            c.pump()
            self.assertIsNone(c.finished_of(blocker[0]))
        finally:
            if blocker:
                c.call("Cancel", path=blocker[0], iface=tb.REQUEST_IFACE)
        self.assertEqual((s["lastFinishReason"], s["status"]), ("cancelled", "Stopped."))
        # the unanswered question left the conversation, back into the entry
        self.assertEqual(len(s["turns"]), 4)
        self.assertEqual(s["entry"], "Are you there?")
        self.wait_idle(c)

    def test_5_screenshot_not_blank(self):
        path = os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], SCREENSHOT)
        self.assertTrue(os.path.exists(path), "test_3 saves the screenshot")
        assert_not_blank(self, path, self.viewer.state()["popup"])

    def test_6_screenshot_needs_vision_model(self):
        v = self.viewer
        v.click(v.state()["newConversation"])
        v.wait_state(lambda s: s["turns"] == [], what="a new conversation")
        # tiny has no vision projector: refused in words, the question kept
        v.click(v.state()["prompt"])
        v.wait_state(lambda s: s["entryFocused"], what="the entry has the focus")
        self.clear_entry()
        v.type_text("What is on the screen?")
        v.wait_state(lambda s: s["entry"] == "What is on the screen?", what="the question typed")
        v.click(v.state()["shot"])
        s = v.wait_state(lambda s: not s["busy"] and s["status"].startswith("This model"),
                         timeout=60, what="the refusal in words")
        self.assertEqual(s["status"], "This model cannot do that (a screenshot needs a model with vision).")
        self.assertEqual(s["turns"], [])
        self.assertEqual(s["entry"], "What is on the screen?")
        # pick the vision model (the last entry) with the keyboard in the picker
        v.click(s["picker"])
        v.wait_state(lambda s: s["pickerOpen"], what="the model list open")
        v.key("End", "Return")
        v.wait_state(lambda s: s["pickerText"] == "vision (sees images)" and not s["pickerOpen"],
                     what="the vision model picked")
        v.click(v.state()["shot"])
        s = v.wait_state(lambda s: not s["busy"] and len(s["turns"]) == 2 and s["turns"][1]["content"],
                         timeout=120, what="the answer about the screenshot")
        self.assertEqual(s["status"], "")
        self.assertEqual(s["turns"][0]["content"], "What is on the screen?")

    def test_7_service_stops_and_comes_back(self):
        v = self.viewer
        c = self.client()
        v.click(v.state()["newConversation"])
        v.wait_state(lambda s: s["turns"] == [], what="a new conversation")
        # test_6 picked the vision model
        self.ask("Still there?", wait=False, before_return=lambda: self.hold_the_slot(c, "vision", []))
        v.wait_state(lambda s: s["status"].startswith("Waiting"), what="the request waiting")
        # npullmd goes away with the widget's request in its queue
        rc = self.daemon.stop()
        with open(self.daemon.log_path) as f:
            log = f.read()
        self.assertIn(rc, (0, None), log)
        self.assertNotIn("CRITICAL", log)
        s = v.wait_state(lambda s: not s["busy"] and s["deviceLine"] == "The npullm service is not running.",
                         what="the widget noticing")
        self.assertEqual(s["turns"], [])
        self.assertEqual(s["entry"], "Still there?")
        # and comes back: the widget follows the new owner of org.npullm
        type(self).daemon = tb.Npullmd(self.bus, self.npullmd_path, [self.model_dir], self.CONFIG, self.ARGS)
        v.wait_state(lambda s: s["deviceLine"] == "CPU — no model loaded" and len(s["models"]) == 3,
                     what="the service back")

    def test_8_closing_leaves_service_idle(self):
        self.viewer.stop()
        self.wait_idle(self.client())


class PlasmaPanelTest(ViewerTestCase):
    """The widget in a panel (plasmoidviewer's panel containment along the
    top edge): the indicator is the panel's part, a click expands the
    popup, and a question typed there is answered."""
    VIEWER = {"size": (1280, 44), "extra_args": ("-c", "org.kde.panel", "-f", "horizontal", "-l", "topedge")}

    def test_click_expands_popup_and_answers(self):
        v = self.viewer
        s = v.wait_state(lambda s: s["indicator"] == "CPU ○" and s["compact"] and not s["expanded"],
                         what="the indicator in the panel, popup closed")
        x, y, w, h = s["compact"]
        self.assertLess(y + h, 45, "the indicator is in the panel")
        v.click(s["compact"])
        s = v.wait_state(lambda s: s["expanded"] and s["entryFocused"], what="the popup open with the focus")
        self.assertGreaterEqual(s["popup"][1], 40, "the popup opens below the panel")
        v.type_text("Hello from the panel")
        v.key("Return")
        s = v.wait_state(lambda s: not s["busy"] and len(s["turns"]) == 2, timeout=120, what="the answer")
        self.assertNotEqual(s["turns"][1]["content"], "")
        self.assertEqual(s["status"], "")
        s = v.wait_state(lambda s: s["indicator"] == "CPU ●", what="the loaded model in the indicator")
        # another application's request: its name in the panel and the popup
        with DesktopApp(self.workdir, self.bus.env):
            s = v.wait_state(lambda s: s["indicator"] == "CPU ● · In use by " + APP_NAME and
                             s["inUseLine"] == "In use by: %s (1 running)" % APP_NAME,
                             what="the application in the indicator")
            # the popup is a window of its own, drawn by Mesa's software
            # renderer on Xvfb: give it a moment to show the last frame
            time.sleep(1)
            path = os.path.join(os.environ["NPULLM_APPLET_ARTIFACTS"], "plasma-panel.png")
            v.screenshot(path)
        assert_not_blank(self, path, s["popup"])
        # its request went with it
        s = v.wait_state(lambda s: s["indicator"] == "CPU ●" and s["inUseLine"] == "", what="nobody else")
        # a second click on the indicator closes the popup
        v.click(s["compact"])
        v.wait_state(lambda s: not s["expanded"], what="the popup closed")


if __name__ == "__main__":
    sys.exit(tb.run_tap(__name__))
