// In the panel: the device, whether a model is loaded, and the other
// applications using the service ("CPU ● · In use by Text Editor").
import QtQuick 2.15
import QtQuick.Layouts 1.15
import org.kde.plasma.plasmoid 2.0
import org.kde.plasma.components 3.0 as PlasmaComponents3

MouseArea {
    Layout.minimumWidth: label.implicitWidth
    Layout.preferredWidth: label.implicitWidth
    hoverEnabled: true
    onClicked: plasmoid.expanded = !plasmoid.expanded
    Component.onCompleted: root.compactItem = this

    PlasmaComponents3.Label {
        id: label
        anchors.centerIn: parent
        text: root.indicator
    }
}
