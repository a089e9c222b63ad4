// Test only (tests/applets): GNOME Shell 43 has no --unsafe-mode flag, and
// org.gnome.Shell.Eval and the Screenshot API refuse callers unless
// global.context.unsafe_mode is set. This sets it (with banners blocked,
// so the "unsafe mode" notification does not cover the popup under test)
// and leaves the overview the Shell starts in.
/* exported init */
const Main = imports.ui.main;

class Helper {
    enable() {
        Main.messageTray.bannerBlocked = true;
        global.context.unsafe_mode = true;
        Main.overview.hide();
    }

    disable() {
        global.context.unsafe_mode = false;
        Main.messageTray.bannerBlocked = false;
    }
}

function init() {
    return new Helper();
}
