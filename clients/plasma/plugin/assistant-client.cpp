#include "assistant-client.h"

#include "request-path.h"
#include "screen-grab.h"

#include <QClipboard>
#include <QDBusArgument>
#include <QDBusMetaType>
#include <QDBusPendingCallWatcher>
#include <QDBusPendingReply>
#include <QDBusServiceWatcher>
#include <QGuiApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

namespace Npullm {

namespace {
const QString kService = QStringLiteral("org.npullm");
const QString kManagerPath = QStringLiteral("/org/npullm");
const QString kManagerIface = QStringLiteral("org.npullm.Manager");
const QString kRequestIface = QStringLiteral("org.npullm.Request");
const QString kPropsIface = QStringLiteral("org.freedesktop.DBus.Properties");
const QString kDBusService = QStringLiteral("org.freedesktop.DBus");

using MessageList = QList<QVariantMap>;

// a{sv} values arrive as QDBusArgument when nested; plain QVariant otherwise
QVariantMap toMap(const QVariant &v)
{
    if (v.canConvert<QDBusArgument>())
        return qdbus_cast<QVariantMap>(v.value<QDBusArgument>());
    return v.toMap();
}

QVariant unwrap(const QVariant &v)
{
    if (v.userType() == qMetaTypeId<QDBusVariant>())
        return v.value<QDBusVariant>().variant();
    return v;
}

// QDBusArgument values (as, aa{sv}) turned into plain QML-friendly values
QVariant plain(const QVariant &v)
{
    const QVariant u = unwrap(v);
    if (u.canConvert<QDBusArgument>()) {
        const QDBusArgument arg = u.value<QDBusArgument>();
        if (arg.currentSignature() == QLatin1String("as"))
            return qdbus_cast<QStringList>(arg);
        if (arg.currentSignature() == QLatin1String("a{sv}"))
            return qdbus_cast<QVariantMap>(arg);
    }
    return u;
}

// aa{sv} entries (ListModels, ListApplications) with plain values, for QML
QVariantList plainList(const MessageList &entries)
{
    QVariantList out;
    for (const QVariantMap &m : entries) {
        QVariantMap entry;
        for (auto it = m.begin(); it != m.end(); ++it)
            entry.insert(it.key(), plain(it.value()));
        out.append(entry);
    }
    return out;
}
} // namespace

AssistantClient::AssistantClient(QObject *parent)
    : QObject(parent)
    , m_bus(QDBusConnection::systemBus())
    , m_coalescer(TokenCoalescer::frameIntervalMs())
{
    qDBusRegisterMetaType<MessageList>();
    connect(&m_coalescer, &TokenCoalescer::flushed, this, &AssistantClient::tokens);
    connect(&m_appsWatch, &ApplicationsWatch::fetchWanted, this, &AssistantClient::listApplications);
    connect(&m_appsWatch, &ApplicationsWatch::applicationsChanged, this, &AssistantClient::applicationsChanged);
    if (!m_bus.isConnected())
        return;
    m_watcher = new QDBusServiceWatcher(kService, m_bus, QDBusServiceWatcher::WatchForOwnerChange, this);
    connect(m_watcher, &QDBusServiceWatcher::serviceOwnerChanged, this, &AssistantClient::onServiceOwnerChanged);
    // the current owner, asked without blocking the UI
    QDBusMessage msg = QDBusMessage::createMethodCall(kDBusService, QStringLiteral("/org/freedesktop/DBus"),
                                                      kDBusService, QStringLiteral("GetNameOwner"));
    msg << kService;
    auto *w = new QDBusPendingCallWatcher(m_bus.asyncCall(msg), this);
    connect(w, &QDBusPendingCallWatcher::finished, this, [this](QDBusPendingCallWatcher *w) {
        w->deleteLater();
        QDBusPendingReply<QString> reply = *w;
        if (!reply.isError() && m_owner.isEmpty())
            setOwner(reply.value());
    });
}

AssistantClient::~AssistantClient()
{
    // a request still running is cancelled by npullmd when the connection
    // goes; with a shared connection (plasmashell) say so explicitly
    if (m_busy && m_replied)
        m_bus.asyncCall(QDBusMessage::createMethodCall(m_requestOwner, m_requestPath, kRequestIface,
                                                       QStringLiteral("Cancel")));
    if (m_busy)
        subscribeRequest(false);
    setOwner(QString());
}

QString AssistantClient::testStatePath() const
{
    return qEnvironmentVariable("NPULLM_PLASMA_TEST_STATE");
}

void AssistantClient::onServiceOwnerChanged(const QString &, const QString &, const QString &newOwner)
{
    setOwner(newOwner);
}

void AssistantClient::setOwner(const QString &owner)
{
    if (owner == m_owner)
        return;
    if (!m_owner.isEmpty()) {
        m_bus.disconnect(m_owner, kManagerPath, kPropsIface, QStringLiteral("PropertiesChanged"), this,
                         SLOT(onManagerPropertiesChanged(QString, QVariantMap, QStringList)));
        m_bus.disconnect(m_owner, kManagerPath, kManagerIface, QStringLiteral("ModelsChanged"), this,
                         SLOT(onModelsChanged()));
    }
    m_owner = owner;
    m_props.clear();
    // the daemon that had our request is gone: it will never finish
    if (m_busy && owner != m_requestOwner) {
        m_coalescer.flushNow();
        endRequest();
        fail(QStringLiteral("org.freedesktop.DBus.Error.NameHasNoOwner"),
             QStringLiteral("npullmd stopped while answering"));
    }
    if (!m_owner.isEmpty()) {
        // by unique name: QtDBus then needs no (blocking) owner lookup
        m_bus.connect(m_owner, kManagerPath, kPropsIface, QStringLiteral("PropertiesChanged"), this,
                      SLOT(onManagerPropertiesChanged(QString, QVariantMap, QStringList)));
        m_bus.connect(m_owner, kManagerPath, kManagerIface, QStringLiteral("ModelsChanged"), this,
                      SLOT(onModelsChanged()));
        fetchManagerProperties();
        refreshModels();
    } else {
        m_models.clear();
        m_modelsError.clear();
        Q_EMIT modelsChanged();
    }
    syncApplications();
    Q_EMIT managerChanged();
}

void AssistantClient::fetchManagerProperties()
{
    QDBusMessage msg = QDBusMessage::createMethodCall(m_owner, kManagerPath, kPropsIface, QStringLiteral("GetAll"));
    msg << kManagerIface;
    auto *w = new QDBusPendingCallWatcher(m_bus.asyncCall(msg), this);
    connect(w, &QDBusPendingCallWatcher::finished, this, [this](QDBusPendingCallWatcher *w) {
        w->deleteLater();
        QDBusPendingReply<QVariantMap> reply = *w;
        if (reply.isError())
            return;
        const QVariantMap all = reply.value();
        for (auto it = all.begin(); it != all.end(); ++it)
            m_props.insert(it.key(), plain(it.value()));
        syncApplications();
        Q_EMIT managerChanged();
    });
}

void AssistantClient::onManagerPropertiesChanged(const QString &iface, const QVariantMap &changed,
                                                 const QStringList &invalidated)
{
    if (iface != kManagerIface)
        return;
    for (auto it = changed.begin(); it != changed.end(); ++it)
        m_props.insert(it.key(), plain(it.value()));
    for (const QString &name : invalidated)
        m_props.remove(name);
    // a model loaded or unloaded: the list's "loaded" flags changed too
    if (changed.contains(QStringLiteral("LoadedModels")))
        refreshModels();
    if (changed.contains(QStringLiteral("ActiveRequests")) || changed.contains(QStringLiteral("QueuedRequests")))
        syncApplications();
    Q_EMIT managerChanged();
}

void AssistantClient::syncApplications()
{
    m_appsWatch.countsChanged(m_props.value(QStringLiteral("ActiveRequests")).toUInt(),
                              m_props.value(QStringLiteral("QueuedRequests")).toUInt());
}

// No interactive authorization: nobody asked for this.
void AssistantClient::listApplications()
{
    if (m_owner.isEmpty()) {
        m_appsWatch.failed();
        return;
    }
    QDBusMessage msg =
        QDBusMessage::createMethodCall(m_owner, kManagerPath, kManagerIface, QStringLiteral("ListApplications"));
    auto *w = new QDBusPendingCallWatcher(m_bus.asyncCall(msg), this);
    connect(w, &QDBusPendingCallWatcher::finished, this, [this](QDBusPendingCallWatcher *w) {
        w->deleteLater();
        QDBusPendingReply<MessageList> reply = *w;
        if (reply.isError())
            m_appsWatch.failed();
        else
            m_appsWatch.answered(plainList(reply.value()));
    });
}

void AssistantClient::onModelsChanged()
{
    refreshModels();
}

void AssistantClient::refreshModels()
{
    if (m_owner.isEmpty())
        return;
    QDBusMessage msg = QDBusMessage::createMethodCall(m_owner, kManagerPath, kManagerIface, QStringLiteral("ListModels"));
    auto *w = new QDBusPendingCallWatcher(m_bus.asyncCall(msg), this);
    connect(w, &QDBusPendingCallWatcher::finished, this, [this](QDBusPendingCallWatcher *w) {
        w->deleteLater();
        QDBusPendingReply<MessageList> reply = *w;
        m_models.clear();
        if (reply.isError()) {
            m_modelsError = reply.error().name();
        } else {
            m_modelsError.clear();
            m_models = plainList(reply.value());
        }
        Q_EMIT modelsChanged();
    });
}

void AssistantClient::chat(const QVariantList &messages, const QString &model, int maxTokens)
{
    MessageList list;
    for (const QVariant &m : messages) {
        const QVariantMap in = m.toMap();
        list.append({{QStringLiteral("role"), in.value(QStringLiteral("role")).toString()},
                     {QStringLiteral("content"), in.value(QStringLiteral("content")).toString()}});
    }
    startRequest(QStringLiteral("Chat"), {QVariant::fromValue(list)}, model, maxTokens);
}

void AssistantClient::describeScreenshot(const QString &prompt, const QString &model, int maxTokens)
{
    if (m_busy)
        return;
    if (!(m_bus.connectionCapabilities() & QDBusConnection::UnixFileDescriptorPassing)) {
        fail(QStringLiteral("org.npullm.Plasma.Error.NoFdPassing"),
             QStringLiteral("this bus connection cannot pass file descriptors"));
        return;
    }
    const QImage shot = grabScreen();
    if (shot.isNull()) {
        fail(QStringLiteral("org.npullm.Plasma.Error.ScreenshotFailed"),
             QStringLiteral("the display server refused to give a screenshot"));
        return;
    }
    QString error;
    const QDBusUnixFileDescriptor fd = pngFileDescriptor(shot, &error);
    if (!fd.isValid()) {
        fail(QStringLiteral("org.npullm.Plasma.Error.ScreenshotFailed"), error);
        return;
    }
    startRequest(QStringLiteral("DescribeImage"), {QVariant::fromValue(fd), prompt}, model, maxTokens);
}

void AssistantClient::startRequest(const QString &method, const QVariantList &args, const QString &model,
                                   int maxTokens)
{
    if (m_busy)
        return;
    if (m_owner.isEmpty()) {
        fail(QStringLiteral("org.freedesktop.DBus.Error.ServiceUnknown"),
             QStringLiteral("The name org.npullm is not owned"));
        return;
    }
    const QString token = QStringLiteral("plasma%1").arg(++m_serial);
    m_requestPath = requestPathForToken(m_bus.baseService(), token);
    m_requestOwner = m_owner;
    m_replied = false;
    m_cancelWanted = false;
    m_state = QStringLiteral("queued");
    m_queuePosition = 0;
    m_coalescer.clear();
    setBusy(true);
    Q_EMIT requestStateChanged();
    // signals may follow the reply at once: subscribe first
    subscribeRequest(true);

    QVariantMap options{{QStringLiteral("handle_token"), token}};
    if (!model.isEmpty())
        options.insert(QStringLiteral("model"), model);
    if (maxTokens > 0)
        options.insert(QStringLiteral("max_tokens"), QVariant::fromValue(uint(maxTokens)));
    QDBusMessage msg = QDBusMessage::createMethodCall(m_requestOwner, kManagerPath, kManagerIface, method);
    msg.setArguments(args + QVariantList{options});
    // polkit may ask for a password (a remote session, say)
    msg.setInteractiveAuthorizationAllowed(true);
    const QString path = m_requestPath;
    // polkit's dialog can take a person a while
    auto *w = new QDBusPendingCallWatcher(m_bus.asyncCall(msg, 5 * 60 * 1000), this);
    connect(w, &QDBusPendingCallWatcher::finished, this, [this, path](QDBusPendingCallWatcher *w) {
        w->deleteLater();
        if (path != m_requestPath || !m_busy)
            return;
        QDBusPendingReply<QDBusObjectPath> reply = *w;
        if (reply.isError()) {
            endRequest();
            fail(reply.error().name(), reply.error().message());
            return;
        }
        m_replied = true;
        Q_EMIT started();
        if (m_cancelWanted)
            stop();
    });
}

void AssistantClient::subscribeRequest(bool on)
{
    using Fn = bool (QDBusConnection::*)(const QString &, const QString &, const QString &, const QString &,
                                         QObject *, const char *);
    const Fn fn = on ? static_cast<Fn>(&QDBusConnection::connect) : static_cast<Fn>(&QDBusConnection::disconnect);
    (m_bus.*fn)(m_requestOwner, m_requestPath, kRequestIface, QStringLiteral("Token"), this,
                SLOT(onToken(QDBusMessage)));
    (m_bus.*fn)(m_requestOwner, m_requestPath, kRequestIface, QStringLiteral("Finished"), this,
                SLOT(onFinished(QDBusMessage)));
    (m_bus.*fn)(m_requestOwner, m_requestPath, kPropsIface, QStringLiteral("PropertiesChanged"), this,
                SLOT(onRequestPropertiesChanged(QDBusMessage)));
}

void AssistantClient::onToken(const QDBusMessage &msg)
{
    if (!m_busy || msg.path() != m_requestPath || msg.arguments().isEmpty())
        return;
    if (m_state != QLatin1String("running")) {
        m_state = QStringLiteral("running");
        m_queuePosition = 0;
        Q_EMIT requestStateChanged();
    }
    m_coalescer.push(msg.arguments().at(0).toString());
}

void AssistantClient::onFinished(const QDBusMessage &msg)
{
    if (!m_busy || msg.path() != m_requestPath || msg.arguments().size() < 2)
        return;
    const QString reason = msg.arguments().at(0).toString();
    QVariantMap stats;
    const QVariantMap raw = toMap(msg.arguments().at(1));
    for (auto it = raw.begin(); it != raw.end(); ++it)
        stats.insert(it.key(), plain(it.value()));
    m_coalescer.flushNow();
    endRequest();
    Q_EMIT finished(reason, stats);
}

void AssistantClient::onRequestPropertiesChanged(const QDBusMessage &msg)
{
    if (!m_busy || msg.path() != m_requestPath || msg.arguments().size() < 2)
        return;
    const QVariantMap changed = toMap(msg.arguments().at(1));
    if (changed.contains(QStringLiteral("State")))
        m_state = plain(changed.value(QStringLiteral("State"))).toString();
    if (changed.contains(QStringLiteral("QueuePosition")))
        m_queuePosition = plain(changed.value(QStringLiteral("QueuePosition"))).toUInt();
    Q_EMIT requestStateChanged();
}

void AssistantClient::stop()
{
    if (!m_busy)
        return;
    if (!m_replied) {
        // the path is not the request's until the reply: cancel then
        m_cancelWanted = true;
        return;
    }
    m_bus.asyncCall(QDBusMessage::createMethodCall(m_requestOwner, m_requestPath, kRequestIface,
                                                   QStringLiteral("Cancel")));
}

void AssistantClient::endRequest()
{
    subscribeRequest(false);
    m_state = QStringLiteral("finished");
    m_queuePosition = 0;
    Q_EMIT requestStateChanged();
    setBusy(false);
}

void AssistantClient::fail(const QString &name, const QString &message)
{
    Q_EMIT failed(name, message);
}

void AssistantClient::setBusy(bool busy)
{
    if (busy == m_busy)
        return;
    m_busy = busy;
    Q_EMIT busyChanged();
}

void AssistantClient::copyToClipboard(const QString &text)
{
    QGuiApplication::clipboard()->setText(text);
}

void AssistantClient::writeTestState(const QVariantMap &state)
{
    const QString path = testStatePath();
    if (path.isEmpty())
        return;
    QSaveFile f(path);
    if (f.open(QIODevice::WriteOnly)) {
        f.write(QJsonDocument(QJsonObject::fromVariantMap(state)).toJson(QJsonDocument::Compact));
        f.commit();
    }
}

} // namespace Npullm
