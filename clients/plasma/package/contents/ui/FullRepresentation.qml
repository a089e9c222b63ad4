// The popup: device line, the applications using the service, device
// status, model picker, the conversation, status, the prompt entry and the
// buttons.
import QtQuick 2.15
import QtQuick.Layouts 1.15
import QtQuick.Controls 2.15 as QQC2
import org.kde.plasma.plasmoid 2.0
import org.kde.plasma.components 3.0 as PlasmaComponents3
import org.kde.plasma.extras 2.0 as PlasmaExtras
import org.kde.kirigami 2.20 as Kirigami
import "logic.js" as Logic

ColumnLayout {
    id: full

    Layout.preferredWidth: Kirigami.Units.gridUnit * 24
    Layout.preferredHeight: Kirigami.Units.gridUnit * 26
    Layout.minimumWidth: Kirigami.Units.gridUnit * 22
    Layout.minimumHeight: Kirigami.Units.gridUnit * 22
    spacing: Kirigami.Units.smallSpacing

    PlasmaExtras.Heading {
        id: deviceHeading
        Layout.fillWidth: true
        level: 4
        text: root.deviceLine
        elide: Text.ElideRight
    }
    // who else uses the service, before the (long) device status
    PlasmaComponents3.Label {
        id: inUseLabel
        Layout.fillWidth: true
        text: root.inUseLine
        visible: text !== ""
        wrapMode: Text.Wrap
    }
    PlasmaComponents3.Label {
        Layout.fillWidth: true
        text: client.deviceStatus
        visible: text !== ""
        opacity: 0.7
        font: Kirigami.Theme.smallFont
        elide: Text.ElideRight
    }

    RowLayout {
        Layout.fillWidth: true
        PlasmaComponents3.Label {
            text: i18n("Model:")
        }
        PlasmaComponents3.ComboBox {
            id: picker
            Layout.fillWidth: true
            model: root.usable
            textRole: "label"
            enabled: root.usable.length > 0
            displayText: root.usable.length > 0 ? currentText : i18n("none")
            currentIndex: {
                const wanted = root.model || client.defaultModel;
                for (let i = 0; i < root.usable.length; i++)
                    if (root.usable[i].name === wanted)
                        return i;
                return -1;
            }
            onActivated: root.model = root.usable[index].name
        }
    }

    PlasmaComponents3.ScrollView {
        id: scroll
        Layout.fillWidth: true
        Layout.fillHeight: true
        // the answer wraps: never a horizontal scroll bar
        QQC2.ScrollBar.horizontal.policy: QQC2.ScrollBar.AlwaysOff
        PlasmaComponents3.TextArea {
            id: history
            readOnly: true
            wrapMode: TextEdit.Wrap
            textFormat: TextEdit.PlainText
            text: Logic.historyText(root.turns)
            placeholderText: i18n("Answers appear here.")
            // follow the answer as it streams in
            onTextChanged: cursorPosition = length
        }
    }

    PlasmaComponents3.Label {
        id: statusLabel
        Layout.fillWidth: true
        text: root.status
        visible: text !== ""
        wrapMode: Text.Wrap
    }

    PlasmaComponents3.TextField {
        id: prompt
        Layout.fillWidth: true
        placeholderText: i18n("Ask anything…")
        onAccepted: {
            if (root.ask(text))
                text = "";
        }
        Connections {
            target: root
            function onFailedPromptChanged() {
                if (root.failedPrompt !== "")
                    prompt.text = root.failedPrompt;
            }
        }
    }

    RowLayout {
        Layout.fillWidth: true
        PlasmaComponents3.Button {
            id: askButton
            text: i18n("Ask")
            icon.name: "document-send"
            enabled: !client.busy && prompt.text.trim() !== ""
            onClicked: {
                if (root.ask(prompt.text))
                    prompt.text = "";
            }
        }
        PlasmaComponents3.Button {
            id: stopButton
            text: i18n("Stop")
            icon.name: "media-playback-stop"
            enabled: client.busy
            onClicked: root.stop()
        }
        PlasmaComponents3.Button {
            id: copyButton
            text: i18n("Copy")
            icon.name: "edit-copy"
            enabled: Logic.lastAnswer(root.turns) !== ""
            onClicked: root.copyAnswer()
        }
        PlasmaComponents3.Button {
            id: shotButton
            text: i18n("Screenshot…")
            icon.name: "spectacle"
            Accessible.name: i18n("Ask about a screenshot")
            PlasmaComponents3.ToolTip.text: i18n("Ask about a screenshot of this screen (the text in the entry is the question)")
            PlasmaComponents3.ToolTip.visible: hovered
            enabled: !client.busy
            onClicked: {
                if (root.askAboutScreenshot(prompt.text))
                    prompt.text = "";
            }
        }
        PlasmaComponents3.Button {
            id: newButton
            text: i18n("New")
            icon.name: "document-new"
            onClicked: root.newConversation()
        }
    }

    // a person opening the popup wants to type at once
    Connections {
        target: plasmoid
        function onExpandedChanged() {
            if (plasmoid.expanded)
                prompt.forceActiveFocus();
        }
    }
    Component.onCompleted: prompt.forceActiveFocus()

    // Tests only ($NPULLM_PLASMA_TEST_STATE): what is on screen, and where
    // the controls are (for xdotool), written to a file.
    Timer {
        running: client.testStatePath !== ""
        repeat: true
        interval: 100
        onTriggered: {
            function rect(item) {
                const p = item.mapToGlobal(0, 0);
                return [Math.round(p.x), Math.round(p.y), Math.round(item.width), Math.round(item.height)];
            }
            client.writeTestState({
                indicator: root.indicator,
                deviceLine: deviceHeading.text,
                inUseLine: inUseLabel.text,
                models: root.usable.map(m => m.label),
                pickerText: picker.displayText,
                picker: rect(picker),
                pickerOpen: picker.popup.visible,
                history: history.text,
                status: root.status,
                entry: prompt.text,
                entryFocused: prompt.activeFocus,
                turns: root.turns,
                busy: client.busy,
                lastFinishReason: root.lastFinishReason,
                expanded: plasmoid.expanded,
                prompt: rect(prompt),
                ask: rect(askButton),
                stop: rect(stopButton),
                copy: rect(copyButton),
                shot: rect(shotButton),
                newConversation: rect(newButton),
                popup: rect(full),
                compact: root.compactItem ? rect(root.compactItem) : null,
            });
        }
    }
}
