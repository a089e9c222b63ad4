// Collects the text of Token signals and hands it on at most once per frame:
// a burst of tokens becomes one UI update.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

namespace Npullm {

class TokenCoalescer : public QObject
{
    Q_OBJECT
public:
    // frameMs: one frame of the display (from its refresh rate)
    explicit TokenCoalescer(int frameMs, QObject *parent = nullptr);

    void push(const QString &text);
    // Hands on what is pending now (before Finished, say).
    void flushNow();
    // Drops the pending text and the scheduled update.
    void clear();
    QString pending() const { return m_pending; }

    // One display frame in ms for the primary screen's refresh rate.
    static int frameIntervalMs();

Q_SIGNALS:
    void flushed(const QString &text);

private:
    void emitPending();

    QString m_pending;
    QTimer m_timer;
};

} // namespace Npullm
