/* The app id in a systemd unit and a /proc/PID/cgroup text
 * (service/app-identity.c), as desktops name the units they launch
 * applications in, and what is not taken as an app id. */
#include <glib.h>

#include "app-identity.h"

static void check_unit(const char *unit, const char *want)
{
    g_autofree gchar *id = npd_app_id_from_unit(unit);
    g_assert_cmpstr(id, ==, want);
}

static void test_units(void)
{
    check_unit("app-gnome-org.gnome.TextEditor-4242.scope", "org.gnome.TextEditor");
    check_unit("app-org.gnome.TextEditor-4242.scope", "org.gnome.TextEditor");
    check_unit("app-flatpak-org.example.App-12.scope", "org.example.App");
    check_unit("app-kde-org.kde.kate@a1b2c3.service", "org.kde.kate");
    check_unit("app-org.kde.kate.service", "org.kde.kate");
    check_unit("app-gnome-org.example.Text\\x2dEditor-7.scope", "org.example.Text-Editor");
    check_unit("app-gnome-firefox-99.scope", "firefox");
    /* not an application's unit, or nothing usable in it */
    check_unit("session-2.scope", NULL);
    check_unit("app.slice", NULL);
    check_unit("app-4242.scope", NULL);
    check_unit("app-gnome-.-1.scope", NULL);
    check_unit("app-gnome-a\\x2fb-1.scope", NULL); /* "/" */
    check_unit("app-gnome-a\\x0ab-1.scope", NULL); /* a newline */
    check_unit("app-gnome-x\\x2-1.scope", NULL);   /* a broken escape keeps its backslash */
}

static void check_cgroup(const char *text, const char *want)
{
    g_autofree gchar *id = npd_app_id_from_cgroup(text);
    g_assert_cmpstr(id, ==, want);
}

static void test_cgroups(void)
{
    check_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                 "app-gnome-org.gnome.TextEditor-4242.scope\n",
                 "org.gnome.TextEditor");
    /* a scope inside an app service: the innermost */
    check_cgroup("0::/user.slice/user@1000.service/app.slice/app-org.kde.konsole@1.service/"
                 "app-org.kde.kate-5.scope\n",
                 "org.kde.kate");
    /* cgroup v1: the named systemd hierarchy */
    check_cgroup("12:pids:/\n3:name=systemd:/user.slice/app-org.example.Old-3.scope\n0::/\n", "org.example.Old");
    check_cgroup("0::/system.slice/sshd.service\n", NULL);
    check_cgroup("", NULL);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/app-identity/units", test_units);
    g_test_add_func("/app-identity/cgroups", test_cgroups);
    return g_test_run();
}
