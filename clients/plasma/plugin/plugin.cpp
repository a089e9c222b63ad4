// The QML module org.npullm.plasma: the widget's D-Bus client.
#include <QQmlEngine>
#include <QQmlExtensionPlugin>

#include "assistant-client.h"

class NpullmPlasmaPlugin : public QQmlExtensionPlugin
{
    Q_OBJECT
    Q_PLUGIN_METADATA(IID QQmlExtensionInterface_iid)

public:
    void registerTypes(const char *uri) override
    {
        qmlRegisterType<Npullm::AssistantClient>(uri, 1, 0, "Client");
    }
};

#include "plugin.moc"
