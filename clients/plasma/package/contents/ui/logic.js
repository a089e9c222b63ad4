// What the npullm widget decides without Plasma: indicator text, which
// models to offer, errors in words, status lines and the conversation
// window, and the words for the applications using the service. Plain JavaScript on i18n() only (the widget's own in Plasma, a
// stand-in in tests/applets/test_plasma_logic.cpp), so it is tested
// without a shell.

// Where a user puts models when none is installed (docs/models.md).
var MODEL_HINT = "npullm-client add FILE.gguf";

// `Device` property -> the short name in the panel.
function deviceLabel(device) {
    if (!device)
        return "…";
    if (device === "cpu")
        return "CPU";
    if (device === "npu-emu")
        return "NPU (emulated)";
    if (device.indexOf("npu") === 0)
        return "NPU";
    return device.toUpperCase();
}

// Panel text: the device, a filled dot while a model is in memory, and the
// other applications using the service (ListApplications' entries).
function indicatorText(device, loadedModels, apps) {
    var loaded = loadedModels && loadedModels.length > 0;
    var inUse = inUseText(apps || []);
    return deviceLabel(device) + " " + (loaded ? "●" : "○") + (inUse ? " · " + inUse : "");
}

// The popup's first line: the device and the models in memory.
function deviceLine(running, device, loadedModels) {
    if (!running)
        return i18n("The npullm service is not running.");
    var models = loadedModels && loadedModels.length > 0
        ? i18n("model loaded: %1", loadedModels.join(", "))
        : i18n("no model loaded");
    return deviceLabel(device) + " — " + models;
}

// ListModels entries ({name, supported, vision, loaded, ...}) -> the models
// that can answer, sorted by name, with the label the picker shows.
function usableModels(models) {
    var out = [];
    for (var i = 0; i < models.length; i++) {
        var m = models[i];
        if (!m.supported || !m.name)
            continue;
        out.push({
            name: m.name,
            vision: Boolean(m.vision),
            loaded: Boolean(m.loaded),
            label: m.vision ? i18n("%1 (sees images)", m.name) : m.name,
        });
    }
    out.sort(function (a, b) { return a.name.localeCompare(b.name); });
    return out;
}

// Nothing usable (but the service answers): what to do about it.
function noModelsText() {
    return i18n("No models are installed. Add one with: %1", MODEL_HINT);
}

// A D-Bus error name (org.npullm.Error.* or another) and its message ->
// a sentence for the popup.
function errorText(dbusName, message) {
    var name = dbusName || "";
    var short = name.replace(/^org\.npullm\.Error\./, "");
    switch (short) {
    case "NotAuthorized":
        return i18n("You are not allowed to use the assistant (polkit said no).");
    case "Busy":
        return i18n("The assistant is busy: its queue is full. Try again in a moment.");
    case "NoSuchModel":
        return i18n("That model is not installed any more. Pick another one.");
    case "NotSupported":
        return i18n("This model cannot do that (a screenshot needs a model with vision).");
    case "ModelLoadFailed":
        return i18n("The model could not be loaded: %1", message);
    case "ContextOverflow":
        return i18n("The conversation is too long for the model. Start a new one.");
    case "InvalidArgument":
        return i18n("The request was refused: %1", message);
    case "Cancelled":
        return i18n("Stopped.");
    case "org.npullm.Plasma.Error.ScreenshotFailed":
        return i18n("The screenshot failed: %1", message);
    }
    if (/ServiceUnknown|NameHasNoOwner|not provided by any \.service|is not owned/.test(name + " " + (message || "")))
        return i18n("The npullm service is not running or not installed.");
    if (/AccessDenied/.test(name))
        return i18n("The system bus refused the call: %1", message);
    return i18n("Something went wrong: %1", message || short);
}

// Request State and QueuePosition -> status line.
function progressText(state, queuePosition) {
    switch (state) {
    case "queued":
        return queuePosition > 0
            ? i18np("Waiting: 1 request ahead", "Waiting: %1 requests ahead", queuePosition)
            : i18n("Waiting for the model…");
    case "loading":
        return i18n("Loading the model…");
    case "running":
        return i18n("Answering…");
    }
    return "";
}

// Finished reason -> status line ("" when nothing needs saying).
function finishText(reason) {
    switch (reason) {
    case "stop":
    case "length":
        return "";
    case "cancelled":
        return i18n("Stopped.");
    }
    return i18n("The answer ended early (%1).", reason);
}

// [{role, content}] -> the last `exchanges` user/assistant pairs (a system
// message at the start stays).
function trimHistory(messages, exchanges) {
    var system = messages.length > 0 && messages[0].role === "system" ? [messages[0]] : [];
    var rest = messages.slice(system.length);
    var users = 0;
    var start = rest.length;
    while (start > 0 && users < exchanges) {
        start--;
        if (rest[start].role === "user")
            users++;
    }
    return system.concat(rest.slice(start));
}

// The conversation as the popup shows it: questions marked with "›".
function historyText(turns) {
    var shown = [];
    for (var i = 0; i < turns.length; i++)
        shown.push(turns[i].role === "user" ? "› " + turns[i].content : turns[i].content);
    return shown.join("\n\n");
}

// The last answer with text ("" when there is none): what Copy copies.
function lastAnswer(turns) {
    for (var i = turns.length - 1; i >= 0; i--)
        if (turns[i].role === "assistant" && turns[i].content)
            return turns[i].content;
    return "";
}

// The ids npullmd gives the widget's own process (its executable, or its
// app id): the popup's own requests are not "another application".
var SHELL_APP_IDS = ["plasmashell", "org.kde.plasmashell", "plasmoidviewer", "org.kde.plasmoidviewer"];

// ListApplications entries ({app_id, display_name?, running, queued}) ->
// [{name, running, queued}] without the widget's own, in the service's
// order. The name is the desktop file's, else the app id.
function appNames(apps) {
    var out = [];
    for (var i = 0; i < (apps || []).length; i++) {
        var a = apps[i];
        if (SHELL_APP_IDS.indexOf(a.app_id || "") >= 0)
            continue;
        out.push({
            name: a.display_name || a.app_id || i18n("an unknown program"),
            running: a.running || 0,
            queued: a.queued || 0,
        });
    }
    return out;
}

// The panel's words: "" (nobody else), "In use by Text Editor", "In use by
// Text Editor and Notes", "In use by Text Editor and 2 others".
function inUseText(apps) {
    var names = appNames(apps).map(function (a) { return a.name; });
    if (names.length === 0)
        return "";
    if (names.length === 1)
        return i18n("In use by %1", names[0]);
    if (names.length === 2)
        return i18n("In use by %1 and %2", names[0], names[1]);
    return i18np("In use by %2 and 1 other", "In use by %2 and %1 others", names.length - 1, names[0]);
}

// The popup's line: every application with its counts, "In use by: Text
// Editor (1 running), Notes (2 waiting)"; "" when nobody else.
function inUseLine(apps) {
    var parts = appNames(apps).map(function (a) {
        var counts = [];
        if (a.running)
            counts.push(i18n("%1 running", a.running));
        if (a.queued)
            counts.push(i18n("%1 waiting", a.queued));
        return counts.length ? a.name + " (" + counts.join(", ") + ")" : a.name;
    });
    return parts.length ? i18n("In use by: %1", parts.join(", ")) : "";
}
