#include "token-coalescer.h"

#include <QGuiApplication>
#include <QScreen>
#include <cmath>

namespace Npullm {

TokenCoalescer::TokenCoalescer(int frameMs, QObject *parent)
    : QObject(parent)
{
    m_timer.setSingleShot(true);
    m_timer.setTimerType(Qt::PreciseTimer);
    m_timer.setInterval(frameMs);
    connect(&m_timer, &QTimer::timeout, this, &TokenCoalescer::emitPending);
}

int TokenCoalescer::frameIntervalMs()
{
    const QScreen *screen = qobject_cast<QGuiApplication *>(QCoreApplication::instance())
        ? QGuiApplication::primaryScreen() : nullptr;
    const qreal hz = screen ? screen->refreshRate() : 0;
    // Xvfb and some drivers report 0 or nonsense: assume 60 Hz then
    if (hz < 20 || hz > 500)
        return 16;
    return qMax(1, int(std::lround(1000.0 / hz)));
}

void TokenCoalescer::push(const QString &text)
{
    if (text.isEmpty())
        return;
    m_pending += text;
    if (!m_timer.isActive())
        m_timer.start();
}

void TokenCoalescer::flushNow()
{
    m_timer.stop();
    emitPending();
}

void TokenCoalescer::clear()
{
    m_timer.stop();
    m_pending.clear();
}

void TokenCoalescer::emitPending()
{
    if (m_pending.isEmpty())
        return;
    const QString text = m_pending;
    m_pending.clear();
    Q_EMIT flushed(text);
}

} // namespace Npullm
