// The npullm Assistant widget: the device in the panel, and a popup to ask
// the local npullm service, the answer streaming in. The D-Bus side is the
// org.npullm.plasma plugin (clients/plasma/plugin), the decisions that need
// no Plasma are in logic.js.
import QtQuick 2.15
import QtQuick.Layouts 1.15
import org.kde.plasma.plasmoid 2.0
import org.kde.plasma.core 2.0 as PlasmaCore
import org.kde.plasma.components 3.0 as PlasmaComponents3
import org.kde.kirigami 2.20 as Kirigami
import org.npullm.plasma 1.0 as Npullm
import "logic.js" as Logic

Item {
    id: root

    // [{role, content}]: shown, and sent as context for follow-ups
    property var turns: []
    // the model asked this session ('' = the service's DefaultModel)
    property string model: plasmoid.configuration.defaultModel
    property string status: ""
    property string lastFinishReason: ""
    property string failedPrompt: ""
    // the panel's part (for the tests' state file)
    property Item compactItem: null
    readonly property var usable: Logic.usableModels(client.models)
    readonly property string indicator: Logic.indicatorText(client.device, client.loadedModels, client.applications)
    readonly property string inUseLine: Logic.inUseLine(client.applications)
    readonly property string deviceLine: Logic.deviceLine(client.serviceRunning, client.device, client.loadedModels)

    Plasmoid.icon: "dialog-messages"
    Plasmoid.toolTipMainText: i18n("npullm Assistant")
    Plasmoid.toolTipSubText: inUseLine ? deviceLine + "\n" + inUseLine : deviceLine
    Plasmoid.switchWidth: Kirigami.Units.gridUnit * 14
    Plasmoid.switchHeight: Kirigami.Units.gridUnit * 14
    Plasmoid.compactRepresentation: CompactRepresentation {}
    Plasmoid.fullRepresentation: FullRepresentation {}

    Npullm.Client {
        id: client

        onTokens: {
            const t = root.turns.slice();
            const last = t[t.length - 1];
            t[t.length - 1] = {role: last.role, content: last.content + text};
            root.turns = t;
        }
        onStarted: root.status = Logic.progressText(client.requestState, client.queuePosition)
        onRequestStateChanged: {
            if (client.busy)
                root.status = Logic.progressText(client.requestState, client.queuePosition);
        }
        onFinished: {
            root.lastFinishReason = reason;
            // stopped or failed before a word of answer: the question was
            // not answered, so it goes back into the entry
            root.takeBackUnanswered();
            root.status = reason === "error"
                ? Logic.errorText(stats.error_name || "", stats.error || "")
                : Logic.finishText(reason);
        }
        onFailed: {
            root.takeBackUnanswered();
            root.status = Logic.errorText(errorName, message);
        }
        onModelsChanged: {
            // (root.usable may not be updated yet in this handler)
            const none = Logic.usableModels(client.models).length === 0;
            if (client.serviceRunning && client.modelsError === "" && none)
                root.status = Logic.noModelsText();
            else if (!none && root.status === Logic.noModelsText())
                root.status = "";
        }
    }

    // Nothing typed is lost: a question without an answer leaves the
    // conversation and goes back into the entry.
    function takeBackUnanswered() {
        const t = root.turns.slice();
        if (t.length >= 2 && t[t.length - 1].role === "assistant" && t[t.length - 1].content === "") {
            root.failedPrompt = t[t.length - 2].content;
            t.splice(-2, 2);
            root.turns = t;
        }
    }

    function ask(prompt) {
        prompt = prompt.trim();
        if (client.busy || prompt === "")
            return false;
        root.failedPrompt = "";
        const t = Logic.trimHistory(root.turns, plasmoid.configuration.historyLength);
        t.push({role: "user", content: prompt});
        const messages = t.slice();
        t.push({role: "assistant", content: ""});
        root.turns = t;
        root.status = i18n("Sending…");
        client.chat(messages, root.model, plasmoid.configuration.maxTokens);
        return true;
    }

    // The popup closes so that it is not in the picture; it opens again
    // with the answer.
    function askAboutScreenshot(prompt) {
        if (client.busy)
            return false;
        root.failedPrompt = "";
        plasmoid.expanded = false;
        shotTimer.prompt = prompt.trim();
        shotTimer.start();
        return true;
    }

    Timer {
        id: shotTimer
        property string prompt
        // the popup's closing animation is over
        interval: Kirigami.Units.longDuration * 2
        onTriggered: {
            const t = root.turns.slice();
            t.push({role: "user", content: prompt || i18n("(about a screenshot)")});
            t.push({role: "assistant", content: ""});
            root.turns = t;
            root.status = i18n("Sending…");
            client.describeScreenshot(prompt, root.model, plasmoid.configuration.maxTokens);
            plasmoid.expanded = true;
        }
    }

    function stop() {
        client.stop();
    }

    function copyAnswer() {
        const text = Logic.lastAnswer(root.turns);
        if (text === "")
            return;
        client.copyToClipboard(text);
        root.status = i18n("Answer copied.");
    }

    function newConversation() {
        if (client.busy)
            client.stop();
        root.turns = [];
        root.status = "";
    }
}
