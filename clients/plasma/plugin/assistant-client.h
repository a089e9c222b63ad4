// The widget's side of the npullm D-Bus protocol (QtDBus, system bus):
// the Manager's properties and model list, the applications using the
// service (ListApplications, asked when the request counts change), and one
// request at a time
// (Chat, or DescribeImage with a screenshot passed as a file descriptor).
// Every call is asynchronous; a request's signals are subscribed on the
// path computed from handle_token before the call is made.
#pragma once

#include <QDBusConnection>
#include <QDBusMessage>
#include <QObject>
#include <QStringList>
#include <QVariantList>
#include <QVariantMap>

#include "applications-watch.h"
#include "token-coalescer.h"

class QDBusPendingCallWatcher;
class QDBusServiceWatcher;

namespace Npullm {

class AssistantClient : public QObject
{
    Q_OBJECT
    Q_PROPERTY(bool serviceRunning READ serviceRunning NOTIFY managerChanged)
    Q_PROPERTY(QString device READ device NOTIFY managerChanged)
    Q_PROPERTY(QString deviceStatus READ deviceStatus NOTIFY managerChanged)
    Q_PROPERTY(QString defaultModel READ defaultModel NOTIFY managerChanged)
    Q_PROPERTY(QStringList loadedModels READ loadedModels NOTIFY managerChanged)
    Q_PROPERTY(QVariantList models READ models NOTIFY modelsChanged)
    Q_PROPERTY(QString modelsError READ modelsError NOTIFY modelsChanged)
    // ListApplications' entries ({app_id, display_name?, source, running, queued}); [] when idle
    Q_PROPERTY(QVariantList applications READ applications NOTIFY applicationsChanged)
    Q_PROPERTY(bool busy READ busy NOTIFY busyChanged)
    Q_PROPERTY(QString requestState READ requestState NOTIFY requestStateChanged)
    Q_PROPERTY(uint queuePosition READ queuePosition NOTIFY requestStateChanged)
    Q_PROPERTY(QString testStatePath READ testStatePath CONSTANT)

public:
    explicit AssistantClient(QObject *parent = nullptr);
    ~AssistantClient() override;

    bool serviceRunning() const { return !m_owner.isEmpty(); }
    QString device() const { return m_props.value(QStringLiteral("Device")).toString(); }
    QString deviceStatus() const { return m_props.value(QStringLiteral("DeviceStatus")).toString(); }
    QString defaultModel() const { return m_props.value(QStringLiteral("DefaultModel")).toString(); }
    QStringList loadedModels() const { return m_props.value(QStringLiteral("LoadedModels")).toStringList(); }
    QVariantList models() const { return m_models; }
    QString modelsError() const { return m_modelsError; }
    QVariantList applications() const { return m_appsWatch.applications(); }
    bool busy() const { return m_busy; }
    QString requestState() const { return m_state; }
    uint queuePosition() const { return m_queuePosition; }
    QString testStatePath() const;

    // messages: [{role, content}]; model '' = the service's default.
    Q_INVOKABLE void chat(const QVariantList &messages, const QString &model, int maxTokens);
    // Grabs the screen under the mouse pointer and asks about it.
    Q_INVOKABLE void describeScreenshot(const QString &prompt, const QString &model, int maxTokens);
    Q_INVOKABLE void stop();
    Q_INVOKABLE void refreshModels();
    Q_INVOKABLE void copyToClipboard(const QString &text);
    // Tests only: writes state (JSON) to $NPULLM_PLASMA_TEST_STATE.
    Q_INVOKABLE void writeTestState(const QVariantMap &state);

Q_SIGNALS:
    void managerChanged();
    void modelsChanged();
    void applicationsChanged();
    void busyChanged();
    void requestStateChanged();
    // The request was accepted (the reply named its path).
    void started();
    // Answer text, at most once per display frame.
    void tokens(const QString &text);
    void finished(const QString &reason, const QVariantMap &stats);
    // The call failed (errorName: an org.npullm.Error.* or D-Bus error name).
    void failed(const QString &errorName, const QString &message);

private Q_SLOTS:
    void onServiceOwnerChanged(const QString &name, const QString &oldOwner, const QString &newOwner);
    void onManagerPropertiesChanged(const QString &iface, const QVariantMap &changed, const QStringList &invalidated);
    void onModelsChanged();
    void onToken(const QDBusMessage &msg);
    void onFinished(const QDBusMessage &msg);
    void onRequestPropertiesChanged(const QDBusMessage &msg);

private:
    void setOwner(const QString &owner);
    void fetchManagerProperties();
    void syncApplications();
    void listApplications();
    void startRequest(const QString &method, const QVariantList &args, const QString &model, int maxTokens);
    void subscribeRequest(bool on);
    void endRequest();
    void fail(const QString &name, const QString &message);
    void setBusy(bool busy);

    QDBusConnection m_bus;
    QDBusServiceWatcher *m_watcher = nullptr;
    QString m_owner; // npullmd's unique name; '' = not running
    QVariantMap m_props;
    QVariantList m_models;
    QString m_modelsError;
    TokenCoalescer m_coalescer;
    ApplicationsWatch m_appsWatch;

    bool m_busy = false;
    bool m_replied = false;
    bool m_cancelWanted = false;
    QString m_requestPath;
    QString m_requestOwner;
    quint64 m_serial = 0;
    QString m_state;
    uint m_queuePosition = 0;
};

} // namespace Npullm
