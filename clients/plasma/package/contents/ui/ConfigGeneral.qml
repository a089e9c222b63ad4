// The widget's settings page (KConfig entries of contents/config/main.xml).
// Plasma adds the "Keyboard Shortcuts" page that opens the popup itself.
import QtQuick 2.15
import QtQuick.Controls 2.15 as QQC2
import org.kde.kirigami 2.20 as Kirigami

Kirigami.FormLayout {
    property alias cfg_defaultModel: defaultModel.text
    property alias cfg_maxTokens: maxTokens.value
    property alias cfg_historyLength: historyLength.value

    QQC2.TextField {
        id: defaultModel
        Kirigami.FormData.label: i18n("Default model:")
        placeholderText: i18n("The service's default")
    }
    QQC2.SpinBox {
        id: maxTokens
        Kirigami.FormData.label: i18n("Longest answer (tokens):")
        from: 1
        to: 32768
        stepSize: 64
    }
    QQC2.SpinBox {
        id: historyLength
        Kirigami.FormData.label: i18n("Exchanges kept for follow-ups:")
        from: 0
        to: 50
    }
}
