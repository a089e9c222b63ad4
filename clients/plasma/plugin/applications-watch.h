// When the widget asks ListApplications: when the request counts
// (ActiveRequests, QueuedRequests) change, never otherwise (no polling).
// At most one call is in flight; counts that change meanwhile ask once more
// after its answer. Idle (both counts 0) clears the list at once without a
// call, and an answer that arrives after that is dropped. A failed call (an
// npullmd without the method, polkit said no) shows nothing, as before.
#pragma once

#include <QObject>
#include <QVariantList>

namespace Npullm {

class ApplicationsWatch : public QObject
{
    Q_OBJECT
public:
    using QObject::QObject;

    void countsChanged(uint active, uint queued);
    // The answer to the call fetchWanted() asked for: its entries, or failed.
    void answered(const QVariantList &applications);
    void failed() { answered({}); }
    QVariantList applications() const { return m_applications; }

Q_SIGNALS:
    // Make one ListApplications call; answer with answered() or failed().
    void fetchWanted();
    void applicationsChanged();

private:
    void ask();
    void show(const QVariantList &applications);

    QVariantList m_applications;
    bool m_inFlight = false;
    bool m_again = false;
    bool m_idle = true;
};

} // namespace Npullm
